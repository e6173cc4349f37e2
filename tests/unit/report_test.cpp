// The HTML report library: a self-contained page with the graph drawn by Graphviz (If bodies
// reachable, nodes labeled with op type and output shape), marks for diverging nodes, names that
// cannot break out of the page, and a useful page when dot is missing.
#include <gtest/gtest.h>

#include <memory>
#include <regex>

#include "../report/report_checks.h"
#include "ir/graph.h"
#include "report/report.h"

using namespace t2o;
using namespace t2o::test;

namespace {

Node node(std::string op, std::string name, std::vector<std::string> ins, std::vector<std::string> outs) {
  Node n;
  n.op_type = std::move(op);
  n.name = std::move(name);
  n.inputs = std::move(ins);
  n.outputs = std::move(outs);
  return n;
}

ValueInfo tensor(std::string name, DType dt, std::vector<Dim> dims) {
  return {std::move(name), Type::tensor(dt, Shape{std::move(dims)}), {}};
}

// x[batch,4] -> Relu -> If(c){Neg}{Identity} -> y[batch,4]
Model branchy_model() {
  Graph then_g, else_g;
  then_g.name = "then";
  then_g.nodes.push_back(node("Neg", "neg_then", {"r"}, {"t"}));
  then_g.outputs.push_back(tensor("t", DType::Float, {Dim::named("batch"), Dim::fixed(4)}));
  else_g.name = "else";
  else_g.nodes.push_back(node("Identity", "id_else", {"r"}, {"e"}));
  else_g.outputs.push_back(tensor("e", DType::Float, {Dim::named("batch"), Dim::fixed(4)}));
  Model m;
  m.opset_import = {{"", 17}};
  m.producer_name = "test";
  Graph& g = m.graph;
  g.name = "main";
  g.inputs.push_back(tensor("x", DType::Float, {Dim::named("batch"), Dim::fixed(4)}));
  g.inputs.push_back(tensor("c", DType::Bool, {}));
  g.nodes.push_back(node("Relu", "relu_1", {"x"}, {"r"}));
  Node iff = node("If", "cond_if", {"c"}, {"y"});
  iff.attributes.push_back(Attribute::make_graph("then_branch", std::make_shared<Graph>(then_g)));
  iff.attributes.push_back(Attribute::make_graph("else_branch", std::make_shared<Graph>(else_g)));
  g.nodes.push_back(iff);
  g.outputs.push_back(tensor("y", DType::Float, {Dim::named("batch"), Dim::fixed(4)}));
  g.value_info.push_back(tensor("r", DType::Float, {Dim::named("batch"), Dim::fixed(4)}));
  return m;
}

// The SVG of one drawn graph (the page holds one view per graph).
std::string view(const std::string& html, const std::string& graph_id) {
  auto start = html.find("id=\"view-" + graph_id + "\"");
  if (start == std::string::npos) return "";
  auto end = html.find("</svg>", start);
  return end == std::string::npos ? "" : html.substr(start, end - start);
}

}  // namespace

TEST(Report, DrawsTheGraphSelfContained) {
  HtmlReport r("torch2onnx inspect branchy.onnx");
  r.set_model(branchy_model());
  r.add_stage("load", 1.5);
  std::string html = r.render();
  EXPECT_EQ(external_refs(html), std::vector<std::string>{});
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  // One drawing per graph: main, then_branch, else_branch.
  EXPECT_EQ(count_of(html, "<svg viewBox") + count_of(html, "<svg\n viewBox"), 3u) << html.substr(0, 2000);
  std::string main = view(html, "g0");
  ASSERT_FALSE(main.empty());
  EXPECT_NE(main.find("xlink:title=\"relu_1\""), std::string::npos) << main;
  EXPECT_NE(main.find(">Relu</text>"), std::string::npos) << main;
  EXPECT_NE(main.find(">batchx4</text>"), std::string::npos) << "op type and output shape label the node";
  EXPECT_EQ(main.find("neg_then"), std::string::npos) << "bodies are drawn on their own";
  EXPECT_NE(view(html, "g1").find("xlink:title=\"neg_then\""), std::string::npos);
  EXPECT_NE(view(html, "g2").find("xlink:title=\"id_else\""), std::string::npos);
  // The If node links to its bodies, so the page can open them from the node.
  EXPECT_NE(html.find(R"("subgraphs":[{"attr":"then_branch","graph":"g1"},{"attr":"else_branch","graph":"g2"}])"),
            std::string::npos);
  // Interface: symbolic dims named.
  EXPECT_NE(html.find("<td class=\"mono\">[batch, 4]</td><td>symbolic</td>"), std::string::npos);
  EXPECT_NE(html.find("graph layout (dot)"), std::string::npos);
}

TEST(Report, MarksTheFirstDivergingNode) {
  HtmlReport r("verify");
  r.set_model(branchy_model());
  r.mark_node("relu_1", {NodeMark::Level::Differs, "max abs 0.5", true, "aten::relu", "model.py:7"});
  std::string html = r.render();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(html, m, std::regex(R"re(<g id="(g0n\d+)" class="node op differs diverging">)re")));
  EXPECT_EQ(m[1].str(), "g0n0");
  EXPECT_NE(html.find("data-node=\"g0n0\">first diverging node: relu_1</button>"), std::string::npos);
  EXPECT_NE(html.find(R"("mark":{"aten":"aten::relu","detail":"max abs 0.5","first":true,"level":"differs","source":"model.py:7"})"),
            std::string::npos);
  // A node without a mark on a page with marks is drawn as not compared, not as agreeing.
  EXPECT_NE(html.find("class=\"node op uncompared\""), std::string::npos);
}

TEST(Report, NamesCannotBreakOutOfThePage) {
  Model m = branchy_model();
  std::string evil = "</script><script>alert(1)</script><b>";
  m.graph.nodes[0].name = evil;
  HtmlReport r("names");
  r.set_model(m);
  r.add_note("warning", "<img src=x>");
  std::string html = r.render();
  EXPECT_EQ(html.find(evil), std::string::npos);
  EXPECT_EQ(html.find("<img src=x>"), std::string::npos);
  EXPECT_EQ(count_of(html, "<script"), 2u) << "the data block and the page script, nothing else";
  EXPECT_EQ(external_refs(html), std::vector<std::string>{});
}

TEST(Report, WithoutDotTheRestRenders) {
  HtmlReport r("inspect");
  r.set_model(branchy_model());
  RenderOptions o;
  o.dot = "/nonexistent/dot";
  std::string html = r.render(o);
  EXPECT_NE(html.find("the graph needs Graphviz"), std::string::npos);
  EXPECT_EQ(html.find("<svg viewBox"), std::string::npos);
  EXPECT_NE(html.find(">Relu</td>"), std::string::npos) << "the op histogram is still there";
  EXPECT_NE(html.find("\"name\":\"relu_1\""), std::string::npos) << "nodes stay searchable";
  EXPECT_EQ(external_refs(html), std::vector<std::string>{});
}

TEST(Report, HistogramBars) {
  std::string svg = histogram_svg({"0", "1e-7", "1"}, {5, 0, 2}, "|diff|");
  EXPECT_EQ(count_of(svg, "<rect"), 3u);
  EXPECT_NE(svg.find("<title>0: 5</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>1: 2</title>"), std::string::npos);
  EXPECT_NE(svg.find("height=\"0\""), std::string::npos) << "an empty bin has no bar";
}

TEST(Report, ScatterOnTheDiagonal) {
  std::string svg = scatter_svg({{0, 0}, {1, 1}, {2, 1.5}}, "PyTorch", "ONNX");
  EXPECT_EQ(count_of(svg, "<circle"), 3u);
  // Scale 0..2 over 220 px from x = 34: (2, 1.5) sits off the diagonal, below it.
  EXPECT_NE(svg.find("cx=\"254.0\" cy=\"89.0\""), std::string::npos) << svg;
  EXPECT_NE(svg.find(">PyTorch</text>"), std::string::npos);
  EXPECT_EQ(count_of(scatter_svg({}, "a", "b"), "<circle"), 0u);
}
