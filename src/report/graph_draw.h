#pragma once
// The model's graphs as inline SVG (laid out by Graphviz dot) and a JSON description of every
// node, which the page's script shows on click and searches by name.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/report.h"

namespace t2o {

struct DrawnGraph {
  std::string id;     // "g0" is the main graph; If/Loop/Scan bodies follow ("g1", ...)
  std::string title;  // "main graph", or "If 'cond_3' then_branch"
  size_t nodes = 0;
  std::string svg;    // empty when it could not be drawn
};

struct GraphDrawing {
  std::vector<DrawnGraph> graphs;
  nlohmann::json nodes = nlohmann::json::object();  // node id -> name, op, inputs, outputs, attributes, mark
  std::string problem;  // why there is no SVG (dot missing, failed or too slow), "" when drawn
  double layout_ms = 0;
};

GraphDrawing draw_model(const Model& m, const std::map<std::string, NodeMark>& marks, const RenderOptions& o);

// Runs `dot -Tsvg` on `dot_text`; returns the SVG document, or "" and sets `why`.
std::string run_dot(const std::string& dot_text, const RenderOptions& o, std::string& why);

}  // namespace t2o
