// --report end to end through the command line: inspect, verify, convert and optimize write one
// self-contained page with the model's graph; verify of a model broken on purpose marks the
// broken node as the first diverging one.
#include <regex>

#include "../report/report_checks.h"
#include "verify_support.h"

using t2o::test::count_of;
using t2o::test::external_refs;

namespace {

// Every node of the main graph is drawn (as g0n<index>) and named in its tooltip.
void expect_drawn(const std::string& html, const std::string& onnx) {
  Model m = load_model(onnx);
  ASSERT_FALSE(m.graph.nodes.empty());
  for (size_t i = 0; i < m.graph.nodes.size(); ++i) {
    const Node& n = m.graph.nodes[i];
    EXPECT_NE(html.find("<g id=\"g0n" + std::to_string(i) + "\" class=\"node op"), std::string::npos) << n.name;
    EXPECT_NE(html.find("<a xlink:title=\"" + n.name + "\">"), std::string::npos) << n.name;
    EXPECT_NE(html.find(">" + n.op_type + "</text>"), std::string::npos) << n.op_type;
  }
}

void expect_self_contained(const std::string& html) {
  EXPECT_EQ(external_refs(html), std::vector<std::string>{});
  EXPECT_EQ(count_of(html, "<script"), 2u) << "the data block and the page script, both inline";
  EXPECT_NE(html.find("<style>"), std::string::npos);
}

size_t node_index(const std::string& onnx, const std::string& name) {
  Model m = load_model(onnx);
  for (size_t i = 0; i < m.graph.nodes.size(); ++i)
    if (m.graph.nodes[i].name == name) return i;
  ADD_FAILURE() << "no node " << name;
  return 0;
}

}  // namespace

TEST(ReportE2E, InspectDrawsTheModel) {
  std::string onnx = cnn();
  fs::path page = work_dir() / "inspect.html";
  CliRun r = cli("inspect " + onnx + " --report " + page.string());
  ASSERT_EQ(r.code, 0) << r.out;
  std::string html = read_text(page);
  expect_self_contained(html);
  expect_drawn(html, onnx);
  // The dynamic batch axis is named as a symbolic dim of the input.
  EXPECT_TRUE(std::regex_search(html, std::regex(R"re(<td class="mono">x</td><td>f32</td><td class="mono">\[batch, 3, 6, 6\]</td><td>symbolic</td>)re")))
      << html.substr(html.find("<h3>Inputs"), 400);
  EXPECT_NE(html.find("<h3>Op histogram</h3>"), std::string::npos);
  EXPECT_EQ(html.find("diverging\""), std::string::npos);
}

TEST(ReportE2E, VerifyMarksTheBrokenNode) {
  std::string line = tag_lines("cnn").at("relu");
  auto [onnx, node] = broken(
      cnn(), "report_relu", [&](const Node& n) { return n.op_type == "Relu" && starts_with(n.doc_string, line + " "); },
      [](Model&, Node& n) { n.op_type = "Sigmoid"; });
  fs::path page = work_dir() / "verify_broken.html";
  CliRun r = cli("verify " + fixtures() + "/cnn/model.pt " + onnx + " --report " + page.string());
  EXPECT_EQ(r.code, 1) << r.out;
  std::string html = read_text(page);
  expect_self_contained(html);
  expect_drawn(html, onnx);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(html, m, std::regex(R"re(<g id="g0n(\d+)" class="node op differs diverging">)re"))) << r.out;
  EXPECT_EQ(std::stoul(m[1].str()), node_index(onnx, node));
  EXPECT_EQ(count_of(html, " diverging\">"), 1u);
  EXPECT_NE(html.find("first diverging node: " + node + "</button>"), std::string::npos);
  // Its source line and aten op are there for the click.
  EXPECT_NE(html.find("\"first\":true,\"level\":\"differs\",\"source\":\"" + line + "\""), std::string::npos) << line;
  EXPECT_NE(html.find("\"aten\":\"aten::relu"), std::string::npos);
  // Nodes before the broken one agree; every output has a |diff| histogram and a scatter plot.
  EXPECT_NE(html.find("class=\"node op agrees\""), std::string::npos);
  EXPECT_EQ(count_of(html, "<svg class=\"histogram\""), load_model(onnx).graph.outputs.size());
  EXPECT_EQ(count_of(html, "<svg class=\"scatter\""), load_model(onnx).graph.outputs.size());
}

TEST(ReportE2E, VerifyOfAnAgreeingModelMarksNothing) {
  std::string onnx = cnn();
  fs::path page = work_dir() / "verify_ok.html";
  CliRun r = cli("verify " + fixtures() + "/cnn/model.pt " + onnx + " --report " + page.string());
  EXPECT_EQ(r.code, 0) << r.out;
  std::string html = read_text(page);
  expect_self_contained(html);
  EXPECT_EQ(html.find("diverging\">"), std::string::npos);
  EXPECT_EQ(html.find("class=\"node op differs"), std::string::npos);
  EXPECT_GT(count_of(html, "class=\"node op agrees\"") + count_of(html, "class=\"node op slight\""), 5u);
  EXPECT_NE(html.find("OK: all outputs agree in 1 sample(s)"), std::string::npos);
}

TEST(ReportE2E, ConvertWithVerifyAndOptimize) {
  fs::path out = work_dir() / "cnn_report.onnx", page = work_dir() / "convert.html";
  CliRun r = cli("convert " + fixtures() + "/cnn/model.pt -o " + out.string() +
                 " --input x:1x3x6x6 --dynamic x:0=batch --verify --report " + page.string());
  ASSERT_EQ(r.code, 0) << r.out;
  std::string html = read_text(page);
  expect_self_contained(html);
  expect_drawn(html, out.string());
  EXPECT_NE(html.find("<h3>Optimizer passes</h3>"), std::string::npos);
  EXPECT_NE(html.find("<td>fold_constants</td>"), std::string::npos);
  EXPECT_NE(html.find("dynamic axis: input x dim 0 is the symbolic dim &#39;batch&#39;"), std::string::npos);
  EXPECT_NE(html.find("OK: all outputs agree"), std::string::npos);
  EXPECT_NE(html.find("convert (load, learn shapes, convert)"), std::string::npos);

  fs::path opt = work_dir() / "cnn_opt.onnx", opt_page = work_dir() / "optimize.html";
  r = cli("optimize " + cnn() + " -o " + opt.string() + " --verify --report " + opt_page.string());
  ASSERT_EQ(r.code, 0) << r.out;
  html = read_text(opt_page);
  expect_self_contained(html);
  expect_drawn(html, opt.string());
  EXPECT_NE(html.find("<td>fold_constants</td>"), std::string::npos);
  EXPECT_NE(html.find("proven on 2 samples"), std::string::npos);
}

// convert --quantize static: the page gives the nodes quantized and the range of every activation
// quantizer, computed from the scale and zero point the model holds.
TEST(ReportE2E, ConvertWithQuantizeShowsRanges) {
  fs::path out = work_dir() / "cnn_int8.onnx", page = work_dir() / "quantize.html";
  CliRun r = cli("convert " + fixtures() + "/cnn/model.pt -o " + out.string() +
                 " --input x:1x3x6x6 --quantize static --report " + page.string());
  ASSERT_EQ(r.code, 0) << r.out;
  std::string html = read_text(page);
  expect_self_contained(html);
  EXPECT_NE(html.find("nodes to int8"), std::string::npos);
  EXPECT_NE(html.find("generated input sets (not real data)"), std::string::npos);
  EXPECT_NE(html.find("<h3>Quantization ranges</h3>"), std::string::npos);
  Model m = load_model(out.string());
  int quantizers = 0;
  for (const Node& n : m.graph.nodes) {
    if (n.op_type != "QuantizeLinear") continue;
    ++quantizers;
    EXPECT_NE(html.find("<td>" + n.name + "</td>"), std::string::npos) << n.name;
  }
  EXPECT_GT(quantizers, 0);
  EXPECT_NE(html.find("quantize (calibrate, rewrite)"), std::string::npos);
}

TEST(ReportE2E, WithoutGraphvizTheRestIsThere) {
  fs::path page = work_dir() / "no_dot.html";
  CliRun r = cli("inspect " + cnn() + " --report " + page.string(), "PATH=/nonexistent");
  ASSERT_EQ(r.code, 0) << r.out;
  std::string html = read_text(page);
  EXPECT_NE(html.find("the graph needs Graphviz"), std::string::npos);
  EXPECT_EQ(html.find("class=\"graph-svg\""), std::string::npos);
  EXPECT_NE(html.find("<h3>Op histogram</h3>"), std::string::npos);
  expect_self_contained(html);
}

TEST(ReportE2E, PyTorchFileIsAUsageError) {
  CliRun r = cli("inspect " + fixtures() + "/cnn/model.pt --report " + (work_dir() / "pt.html").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--report draws ONNX models"), std::string::npos) << r.out;
}

// The pitfall fixtures of GPU-scripted code and spectral norm (tests/models/pitfall_models.py):
// the page says what the conversion repaired.
TEST(ReportE2E, ConvertListsRepairs) {
  fs::path d = work_dir() / "pitfalls";
  fs::create_directories(d / "cuda");
  fs::create_directories(d / "spectral");
  std::string build = std::string("cd ") + d.string() + " && PYTHONPATH=" + T2O_SOURCE_DIR + "/tests/models " +
                      T2O_PYTHON + " -c \"import pitfall_models as p; p.build_cuda('cuda'); p.build_spectral('spectral')\"";
  ASSERT_EQ(std::system(build.c_str()), 0) << build;
  fs::path page = d / "cuda.html";
  CliRun r = cli("convert " + (d / "cuda/model.pt").string() + " -o " + (d / "cuda.onnx").string() +
                 " --input x:3x6 --report " + page.string());
  ASSERT_EQ(r.code, 0) << r.out;
  std::string html = read_text(page);
  EXPECT_TRUE(std::regex_search(html, std::regex(R"re(<li class="repair"><span class="kind">repair</span>device constants: \d+ CUDA device use)re")))
      << html.substr(0, 3000);
  page = d / "spectral.html";
  r = cli("convert " + (d / "spectral/model.pt").string() + " -o " + (d / "spectral.onnx").string() +
          " --input x:2x3x8x8 --report " + page.string());
  ASSERT_EQ(r.code, 0) << r.out;
  html = read_text(page);
  EXPECT_NE(html.find("spectral norm: layers conv, fc carry spectral-norm parametrizations"), std::string::npos);
  expect_self_contained(html);
}

TEST(ReportE2E, FailedConversionSaysWhy) {
  fs::path out = work_dir() / "never.onnx", page = work_dir() / "failed.html";
  CliRun r = cli("convert " + fixtures() + "/cnn/model.pt -o " + out.string() + " --input x:1x3x6x6 --input nosuch:1x3 --report " +
                 page.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_FALSE(fs::exists(out));
  std::string html = read_text(page);
  EXPECT_NE(html.find("<li class=\"error\"><span class=\"kind\">error</span>--input nosuch does not name a forward() argument"),
            std::string::npos) << html.substr(0, 3000);
  EXPECT_NE(html.find("conversion failed: nothing was written"), std::string::npos);
  expect_self_contained(html);
}

TEST(ReportE2E, VerifyThatCannotRunSaysWhy) {
  fs::path page = work_dir() / "verify_failed.html";
  CliRun r = cli("verify " + fixtures() + "/cnn/model.pt " + cnn() + " --input x:1x5x6x6 --report " + page.string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 1) << "not a mismatch: PyTorch cannot run these inputs\n" << r.out;
  std::string html = read_text(page);
  EXPECT_NE(html.find("<li class=\"error\"><span class=\"kind\">error</span>"), std::string::npos) << r.out;
  EXPECT_NE(html.find("verification did not run"), std::string::npos);
  expect_drawn(html, cnn());
  expect_self_contained(html);
}
