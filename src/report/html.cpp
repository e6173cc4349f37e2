// Assembles the report page: summary, what changed and why, tables and figures given by the
// command, the drawn graph with its node details, the model's interface and op histogram, and
// the time of each stage.
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "onnx/model_io.h"
#include "report/graph_draw.h"
#include "report/page_assets.h"
#include "report/report.h"

namespace t2o {

std::string html_escape(const std::string& s) {
  std::string r;
  r.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      case '\'': r += "&#39;"; break;
      default: r += c;
    }
  }
  return r;
}

namespace {

std::string human_bytes(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[48];
  if (u == 0) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.2f ms" : "%.0f ms", ms);
  return buf;
}

bool looks_numeric(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || (s[0] == '-' && s.size() > 1));
}

std::string table_html(const ReportTable& t) {
  std::string h = t.title.empty() ? "" : "<h3>" + html_escape(t.title) + "</h3>\n";
  if (t.header.empty() && t.rows.empty()) return h + (t.caption.empty() ? "" : "<p class=\"caption\">" + html_escape(t.caption) + "</p>\n");
  h += "<table>\n<tr>";
  for (const auto& c : t.header) h += "<th>" + html_escape(c) + "</th>";
  h += "</tr>\n";
  for (const auto& row : t.rows) {
    h += "<tr>";
    for (const auto& c : row) h += std::string(looks_numeric(c) ? "<td class=\"num\">" : "<td>") + html_escape(c) + "</td>";
    h += "</tr>\n";
  }
  h += "</table>\n";
  if (!t.caption.empty()) h += "<p class=\"caption\">" + html_escape(t.caption) + "</p>\n";
  return h;
}

std::string value_rows(const std::vector<const ValueInfo*>& vs) {
  std::string h;
  for (const ValueInfo* v : vs) {
    std::string dtype, dims;
    if (v->type.kind == Type::Kind::Tensor) {
      dtype = dtype_name(v->type.elem);
      if (!v->type.shape) dims = "unknown rank";
      else {
        dims = "[";
        for (size_t i = 0; i < v->type.shape->dims.size(); ++i) {
          const Dim& d = v->type.shape->dims[i];
          std::string one = d.is_static() ? std::to_string(d.value) : d.is_symbolic() ? d.symbol : "?";
          dims += (i ? ", " : "") + one;
        }
        dims += "]";
      }
    } else {
      dtype = v->type.to_string();
    }
    bool symbolic = v->type.shape && std::any_of(v->type.shape->dims.begin(), v->type.shape->dims.end(),
                                                 [](const Dim& d) { return !d.is_static(); });
    h += "<tr><td class=\"mono\">" + html_escape(v->name) + "</td><td>" + html_escape(dtype) + "</td><td class=\"mono\">" +
         html_escape(dims) + "</td><td>" + (symbolic ? "symbolic" : "static") + "</td></tr>\n";
  }
  return h;
}

std::string model_html(const Model& m) {
  std::string h = "<section id=\"model\">\n<h2>Model</h2>\n<dl class=\"facts\">\n";
  auto fact = [&](const std::string& k, const std::string& v) {
    h += "<dt>" + html_escape(k) + "</dt><dd>" + html_escape(v) + "</dd>\n";
  };
  fact("producer", (m.producer_name.empty() ? "(unknown)" : m.producer_name) + " " + m.producer_version);
  std::string opsets;
  for (const auto& o : m.opset_import)
    opsets += (opsets.empty() ? "" : ", ") + (o.domain.empty() ? std::string("ai.onnx") : o.domain) + " " + std::to_string(o.version);
  fact("opsets", opsets);
  size_t nodes = 0;
  std::map<std::string, int> hist;
  m.graph.for_each_node([&](const Node& n) {
    ++nodes;
    hist[(n.domain.empty() || n.domain == "ai.onnx") ? n.op_type : n.domain + "::" + n.op_type]++;
  });
  fact("nodes", std::to_string(nodes) + " (subgraphs included)");
  fact("parameters", std::to_string(m.graph.parameter_count()) + " values, " + human_bytes(m.graph.parameter_bytes()) +
                         " in " + std::to_string(m.graph.initializers.size()) + " initializers");
  h += "</dl>\n<h3>Inputs</h3>\n<table>\n<tr><th>name</th><th>dtype</th><th>dims</th><th></th></tr>\n";
  h += value_rows(m.graph.runtime_inputs());
  h += "</table>\n<h3>Outputs</h3>\n<table>\n<tr><th>name</th><th>dtype</th><th>dims</th><th></th></tr>\n";
  std::vector<const ValueInfo*> outs;
  for (const ValueInfo& v : m.graph.outputs) outs.push_back(&v);
  h += value_rows(outs);
  h += "</table>\n<h3>Op histogram</h3>\n<table>\n<tr><th>op</th><th>count</th><th></th></tr>\n";
  std::vector<std::pair<std::string, int>> sorted(hist.begin(), hist.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.second > b.second; });
  int top = sorted.empty() ? 1 : sorted[0].second;
  for (const auto& [op, n] : sorted)
    h += "<tr><td class=\"mono\">" + html_escape(op) + "</td><td class=\"num\">" + std::to_string(n) +
         "</td><td><span class=\"bar\" style=\"width:" + std::to_string(std::max(1, 240 * n / top)) + "px\"></span></td></tr>\n";
  h += "</table>\n</section>\n";
  return h;
}

// JSON inside <script>: no '<' at all, so neither "</script" nor "<!--" can change how the page
// parses (JSON strings read "\u003c" back as '<').
std::string script_safe(const std::string& json) {
  std::string r;
  r.reserve(json.size());
  for (char c : json) {
    if (c == '<') r += "\\u003c";
    else r += c;
  }
  return r;
}

}  // namespace

HtmlReport::HtmlReport(std::string title) : title_(std::move(title)) {}

void HtmlReport::set_model(const Model& m) { model_ = m; }
void HtmlReport::add_fact(const std::string& key, const std::string& value) { facts_.emplace_back(key, value); }
void HtmlReport::add_stage(const std::string& name, double ms) { stages_.emplace_back(name, ms); }
void HtmlReport::add_note(const std::string& kind, const std::string& text) { notes_.emplace_back(kind, text); }
void HtmlReport::add_table(ReportTable t) { tables_.push_back(std::move(t)); }
void HtmlReport::add_figure(const std::string& title, const std::string& svg) { figures_.push_back({title, svg}); }
void HtmlReport::mark_node(const std::string& node_name, NodeMark m) { marks_[node_name] = std::move(m); }

std::string HtmlReport::render(const RenderOptions& o) const {
  GraphDrawing d;
  if (model_) d = draw_model(*model_, marks_, o);
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
      html_escape(title_) + "</title>\n<style>" + kReportCss + "</style>\n</head>\n<body data-ready=\"0\">\n";
  h += "<header>\n<h1>" + html_escape(title_) + "</h1>\n<dl class=\"facts\">\n";
  for (const auto& [k, v] : facts_) h += "<dt>" + html_escape(k) + "</dt><dd>" + html_escape(v) + "</dd>\n";
  h += "</dl>\n<nav>";
  if (!notes_.empty()) h += "<a href=\"#changes\">changes</a>";
  if (!tables_.empty() || !figures_.empty()) h += "<a href=\"#results\">results</a>";
  if (model_) h += "<a href=\"#graph\">graph</a><a href=\"#model\">model</a>";
  if (!stages_.empty()) h += "<a href=\"#stages\">time</a>";
  h += "</nav>\n</header>\n";

  if (!notes_.empty()) {
    h += "<section id=\"changes\">\n<h2>What was changed or noticed, and why</h2>\n<ul class=\"notes\">\n";
    for (const auto& [kind, text] : notes_)
      h += "<li class=\"" + html_escape(kind) + "\"><span class=\"kind\">" + html_escape(kind) + "</span>" + html_escape(text) + "</li>\n";
    h += "</ul>\n</section>\n";
  }
  if (!tables_.empty() || !figures_.empty()) {
    h += "<section id=\"results\">\n<h2>Results</h2>\n";
    for (const ReportTable& t : tables_) h += table_html(t);
    for (const Figure& f : figures_)
      h += "<div class=\"figure\"><h3>" + html_escape(f.title) + "</h3>\n" + f.svg + "\n</div>\n";
    h += "</section>\n";
  }

  if (model_) {
    h += "<section id=\"graph\">\n<h2>Graph</h2>\n";
    auto first = std::find_if(marks_.begin(), marks_.end(), [](const auto& m) { return m.second.first; });
    if (!marks_.empty()) {
      h += "<p class=\"legend\">error against PyTorch: <span class=\"lv-agrees\">agrees</span><span class=\"lv-slight\">"
           "slightly off</span><span class=\"lv-differs\">differs</span><span class=\"lv-uncompared\">"
           "not compared</span><span class=\"lv-first\">first diverging node</span></p>\n";
    }
    h += "<div class=\"toolbar\">";
    if (d.graphs.size() > 1) {
      h += "<label>graph <select id=\"graph-select\">";
      for (const DrawnGraph& g : d.graphs)
        h += "<option value=\"" + g.id + "\">" + html_escape(g.title) + " (" + std::to_string(g.nodes) + " nodes)</option>";
      h += "</select></label>";
    }
    h += "<input id=\"search\" type=\"search\" placeholder=\"search node name\" aria-label=\"search node name\">"
         "<span id=\"search-count\"></span><button id=\"fit\" type=\"button\">fit all</button>";
    if (first != marks_.end()) {
      std::string id;
      for (const auto& [nid, info] : d.nodes.items())
        if (info.value("name", "") == first->first && info["graph"] == "g0") id = nid;
      if (!id.empty())
        h += "<button id=\"goto-first\" type=\"button\" data-node=\"" + html_escape(id) + "\">first diverging node: " +
             html_escape(first->first) + "</button>";
    }
    h += "</div>\n<div id=\"search-results\"></div>\n";
    if (!d.problem.empty()) h += "<p class=\"missing\" id=\"graph-missing\">" + html_escape(d.problem) + ".</p>\n";
    h += "<div class=\"graph-wrap\"><div class=\"graph-area\">\n";
    for (const DrawnGraph& g : d.graphs)
      h += "<div class=\"graph-view\" data-graph=\"" + g.id + "\" id=\"view-" + g.id + "\">" + g.svg + "</div>\n";
    h += "</div>\n<aside id=\"details\">Click a node to see its inputs, outputs and attributes. Scroll to zoom, drag to "
         "move.</aside></div>\n</section>\n";
    h += model_html(*model_);
  }

  std::vector<std::pair<std::string, double>> stages = stages_;
  if (model_ && d.problem.empty()) stages.emplace_back("graph layout (dot)", d.layout_ms);
  if (!stages.empty()) {
    h += "<section id=\"stages\">\n<h2>Time of each stage</h2>\n<table>\n<tr><th>stage</th><th>time</th></tr>\n";
    for (const auto& [name, ms] : stages)
      h += "<tr><td>" + html_escape(name) + "</td><td class=\"num\">" + ms_text(ms) + "</td></tr>\n";
    h += "</table>\n</section>\n";
  }
  nlohmann::json data = {{"nodes", d.nodes}};
  h += "<script type=\"application/json\" id=\"report-data\">" +
       script_safe(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) + "</script>\n";
  h += std::string("<script>") + kReportJs + "</script>\n</body>\n</html>\n";
  return h;
}

void HtmlReport::write(const std::string& path, const RenderOptions& o) const { write_file_atomic(path, render(o)); }

}  // namespace t2o
