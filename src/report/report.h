#pragma once
// The HTML report: one self-contained page (styles, scripts and the graph's SVG inline; no
// network, no other files) that a person opens in a browser to see a model, where its numbers
// depart from PyTorch, and what the tools changed in it.
//
//   t2o::HtmlReport r("torch2onnx inspect model.onnx");
//   r.set_model(model);
//   r.add_stage("load", 12.5);
//   r.mark_node("Conv_3", {t2o::NodeMark::Level::Differs, "max abs 0.5", true});
//   r.write("model.html");
//
// The graph is laid out by Graphviz's `dot` (found on PATH at render time); without it the page
// still holds everything else and says what the graph needs.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace t2o {

// A node's value against its reference (PyTorch), as the graph colors it.
struct NodeMark {
  enum class Level { Agrees, SlightlyOff, Differs, NotCompared };
  Level level = Level::NotCompared;
  std::string detail;  // one line shown on click: "max abs 0.5, max rel 0.1, 12% differ"
  bool first = false;  // the first diverging node: drawn with a thick red border
  std::string aten_op, source;  // where it came from, shown on click
  std::string module;           // the submodule it came from ("layer3.1.relu"), shown on click
};

struct ReportTable {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string caption;  // a sentence under the table
};

struct RenderOptions {
  std::string dot = "dot";   // the Graphviz program (a name looked up on PATH, or a path)
  int dot_timeout_s = 120;   // a layout running longer is stopped; the page says so
};

class HtmlReport {
 public:
  explicit HtmlReport(std::string title);

  // The model the page describes and draws. Node output shapes come from its value_info, filled
  // by onnx shape inference when the model carries none.
  void set_model(const Model& m);
  void add_fact(const std::string& key, const std::string& value);
  void add_stage(const std::string& name, double ms);
  // kind: "error", "warning", "repair" or "note"; shown in the list of what was changed and why.
  void add_note(const std::string& kind, const std::string& text);
  void add_table(ReportTable t);
  // A titled block of trusted markup (e.g. an inline SVG plot made by histogram_svg).
  void add_figure(const std::string& title, const std::string& svg_markup);
  void mark_node(const std::string& node_name, NodeMark m);

  std::string render(const RenderOptions& o = {}) const;
  void write(const std::string& path, const RenderOptions& o = {}) const;  // atomically

 private:
  struct Figure {
    std::string title, svg;
  };
  std::string title_;
  std::optional<Model> model_;
  std::vector<std::pair<std::string, std::string>> facts_;
  std::vector<std::pair<std::string, double>> stages_;
  std::vector<std::pair<std::string, std::string>> notes_;
  std::vector<ReportTable> tables_;
  std::vector<Figure> figures_;
  std::map<std::string, NodeMark> marks_;
};

// An inline SVG bar chart: one bar per bin, its label under it, the count above it.
std::string histogram_svg(const std::vector<std::string>& labels, const std::vector<int64_t>& counts,
                          const std::string& x_title);

// An inline SVG scatter plot of (x, y) points with the y = x diagonal: points off it disagree.
std::string scatter_svg(const std::vector<std::pair<double, double>>& points, const std::string& x_title,
                        const std::string& y_title);

// Text made safe inside HTML elements and attribute values.
std::string html_escape(const std::string& s);

}  // namespace t2o
