#include "cli/report_content.h"

#include <chrono>
#include <map>
#include <cstdio>
#include <tuple>

namespace t2o::cli {

namespace {

std::string g3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string bytes_mib(int64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return buf;
}

#ifdef T2O_WITH_TORCH
std::string stats_detail(const TensorStats& s) {
  return s.verdict() + "; max abs " + g3(s.max_abs) + ", max rel " + g3(s.max_rel) + ", " +
         g3(100.0 * s.mismatch_share()) + "% outside tolerance, cosine " + g3(s.cosine);
}

// Rounding of a reordered float sum puts a few elements of a large tensor just outside rtol/atol
// (values near zero); a wrong op or weight moves most of them. Below this share a node is
// "slightly off", not "differs".
constexpr double kSlightlyOffShare = 0.01;

NodeMark mark_of(const std::optional<TensorStats>& s) {
  NodeMark k;
  if (!s) {
    k.level = NodeMark::Level::NotCompared;
    k.detail = "not compared (no TorchScript counterpart, or not captured)";
    return k;
  }
  bool slight = s->shape_ok() && s->nan_only_one == 0 && s->mismatch_share() < kSlightlyOffShare;
  k.level = s->values_ok() ? NodeMark::Level::Agrees : slight ? NodeMark::Level::SlightlyOff : NodeMark::Level::Differs;
  k.detail = stats_detail(*s);
  return k;
}

std::vector<std::string> value_row(const char* role, const ValueCheck& c) {
  if (!c.stats) return {role, c.onnx_name, c.torch_value, c.what, "", "", ""};
  return {role, c.onnx_name, c.torch_value, c.stats->verdict(), g3(c.stats->max_abs), g3(c.stats->max_rel), g3(c.stats->cosine)};
}
#endif

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double ms_since(int64_t start_ns) { return static_cast<double>(now_ns() - start_ns) / 1e6; }

void add_optimize_content(HtmlReport& r, const OptimizeReport& o) {
  r.add_fact("optimizer", std::to_string(o.nodes_before) + " -> " + std::to_string(o.nodes_after) + " nodes, initializers " +
                              bytes_mib(o.initializer_bytes_before) + " -> " + bytes_mib(o.initializer_bytes_after) +
                              (o.verified ? ", proven on " + std::to_string(o.samples) + " samples" : ", not proven"));
  ReportTable t;
  t.title = "Optimizer passes";
  t.header = {"pass", "runs that changed the model", "rewrites", "time (ms)", "rolled back"};
  for (const PassStats& p : o.passes)
    t.rows.push_back({p.name, std::to_string(p.runs), std::to_string(p.rewrites), g3(p.ms), p.rolled_back ? "yes" : ""});
  t.caption = "Each pass runs until it changes nothing. " +
              std::string(o.verified ? "Every pass was proven: the model ran before and after it on generated inputs, and a "
                                       "pass that changed an output was rolled back."
                                     : "The passes were not proven on the runtime" +
                                           (o.not_verified.empty() ? std::string(".") : " (" + o.not_verified + ")."));
  r.add_table(std::move(t));
  for (const Rollback& b : o.rollbacks) r.add_note("warning", "optimizer pass " + b.pass + " rolled back: " + b.message);
  for (const std::string& w : o.warnings) r.add_note("warning", w);
  if (!o.not_verified.empty()) r.add_note("note", "optimizer result not proven: " + o.not_verified);
  r.add_stage("optimize (passes)", o.total_ms - o.verify_ms);
  if (o.verify_ms > 0) r.add_stage("optimize (proof runs)", o.verify_ms);
}

void add_quantize_content(HtmlReport& r, const QuantizeResult& q, const Model& m) {
  std::string ops;
  for (const auto& [op, n] : q.by_op) ops += (ops.empty() ? "" : ", ") + std::to_string(n) + " " + op;
  r.add_fact("quantization", std::to_string(q.quantized) + " nodes to int8" + (ops.empty() ? "" : " (" + ops + ")") +
                                 ", initializers " + bytes_mib(q.initializer_bytes_before) + " -> " +
                                 bytes_mib(q.initializer_bytes_after));
  if (q.calibration_samples > 0)
    r.add_note(q.generated_calibration ? "warning" : "note",
               "activation ranges calibrated on " + std::to_string(q.calibration_samples) +
                   (q.generated_calibration ? " generated input sets (not real data)" : " input sets"));
  for (const std::string& s : q.skipped) r.add_note("note", "left in float: " + s);
  // The range of each activation quantizer: [(qmin - zero point) * scale, (qmax - zero point) * scale].
  std::map<std::string, const Initializer*> inits;
  for (const Initializer& i : m.graph.initializers) inits[i.name] = &i;
  ReportTable t;
  t.title = "Quantization ranges";
  t.header = {"quantized value", "node", "scale", "zero point", "type", "range"};
  for (const Node& n : m.graph.nodes) {
    if (n.op_type != "QuantizeLinear" || n.inputs.size() < 3) continue;
    auto s = inits.find(n.inputs[1]), z = inits.find(n.inputs[2]);
    if (s == inits.end() || z == inits.end() || s->second->tensor.numel() != 1 || z->second->tensor.numel() != 1) continue;
    const Tensor& zt = z->second->tensor;
    double scale = s->second->tensor.as_double(0), zp = zt.as_double(0);
    bool u8 = zt.dtype() == DType::UInt8;
    double lo = ((u8 ? 0.0 : -128.0) - zp) * scale, hi = ((u8 ? 255.0 : 127.0) - zp) * scale;
    t.rows.push_back({n.inputs[0], n.name, g3(scale), g3(zp), u8 ? "uint8" : "int8", "[" + g3(lo) + ", " + g3(hi) + "]"});
  }
  if (!t.rows.empty()) {
    t.caption = "Per-tensor activation quantizers; values outside the range are clipped to its ends.";
    r.add_table(std::move(t));
  }
}

#ifdef T2O_WITH_TORCH
void add_verify_content(HtmlReport& r, const VerifyReport& v, const Model& m) {
  size_t bad = 0;
  for (const SampleResult& s : v.samples) bad += !s.ok();
  r.add_fact("verification", v.ok() ? "OK: all outputs agree in " + std::to_string(v.samples.size()) + " sample(s)"
                                     : "MISMATCH: " + std::to_string(bad) + " of " + std::to_string(v.samples.size()) +
                                           " sample(s) disagree");
  r.add_fact("compared", "PyTorch " + v.pt_path + " vs " + (v.backend == "ort" ? "ONNX Runtime" : "t2o runtime") +
                             " (rtol " + g3(v.tol.rtol) + ", atol " + g3(v.tol.atol) + ")");
  for (const std::string& n : v.notes) r.add_note("note", n);
  for (const SampleResult& s : v.samples) {
    ReportTable t;
    t.title = "Sample " + std::to_string(s.index) + ":";
    for (const auto& [n, x] : s.inputs) t.title += " " + n + " " + dims_to_string(x.dims()) + " " + std::string(dtype_name(x.dtype())) + ";";
    t.header = {"output", "shape", "dtype", "max abs", "max rel", "outside tolerance", "cosine", "NaN torch/onnx", "verdict"};
    for (const OutputCheck& o : s.outputs)
      t.rows.push_back({o.name, dims_to_string(o.stats.ref_shape), std::string(dtype_name(o.stats.ref_dtype)), g3(o.stats.max_abs),
                        g3(o.stats.max_rel), g3(100.0 * o.stats.mismatch_share()) + "%", g3(o.stats.cosine),
                        std::to_string(o.stats.ref_nan) + "/" + std::to_string(o.stats.got_nan), o.stats.verdict()});
    t.caption = s.problem;
    r.add_table(std::move(t));
  }
  const LocateResult& L = v.locate;
  const SampleResult* located = nullptr;
  for (const SampleResult& s : v.samples)
    if (s.index == L.sample) located = &s;
  if (!located && !v.samples.empty()) located = &v.samples[0];
  if (located)
    for (const OutputCheck& o : located->outputs) {
      std::string sample = " (sample " + std::to_string(located->index) + ")";
      if (!o.abs_diff_hist.empty())
        r.add_figure("|torch - onnx| of " + o.name + sample,
                     histogram_svg(abs_diff_bin_labels(), o.abs_diff_hist, "elements per decade of |difference|"));
      if (!o.pairs.empty())
        r.add_figure("PyTorch vs ONNX: " + o.name + sample + ", " + std::to_string(o.pairs.size()) + " elements",
                     scatter_svg(o.pairs, "PyTorch", "ONNX"));
    }
  if (!L.ran) return;
  for (const NodeCheck& nc : L.nodes) {
    if (nc.index < 0 || static_cast<size_t>(nc.index) >= m.graph.nodes.size()) continue;
    NodeMark k = mark_of(nc.worst);
    NodeOrigin o = parse_node_origin(m.graph.nodes[static_cast<size_t>(nc.index)].doc_string);
    k.source = o.source;
    k.aten_op = o.aten_op;
    k.module = o.module;
    r.mark_node(nc.name, k);
  }
  ReportTable t;
  t.title = L.found ? (v.ok() ? "First node outside tolerance" : "First diverging node") : "Intermediate values";
  if (L.found) {
    NodeMark k;
    for (const ValueCheck& c : L.outputs)
      if (c.stats && !c.stats->values_ok()) k = mark_of(c.stats);
    if (k.level == NodeMark::Level::NotCompared) k.level = NodeMark::Level::Differs;  // located by outputs only
    k.first = true;
    k.aten_op = L.aten_op;
    k.source = L.source;
    k.module = L.module;
    r.mark_node(L.node_name, k);
    t.header = {"", "ONNX value", "torch value", "verdict", "max abs", "max rel", "cosine"};
    for (const ValueCheck& c : L.outputs) t.rows.push_back(value_row("out", c));
    for (const ValueCheck& c : L.inputs) t.rows.push_back(value_row("in", c));
    t.caption = L.op_type + " '" + L.node_name + "' (node " + std::to_string(L.node_index) + ")" +
                (L.aten_op.empty() ? "" : " from " + L.aten_op) + (L.module.empty() ? "" : " in " + L.module) +
                (L.source.empty() ? "" : " at " + L.source) + ", sample " +
                std::to_string(L.sample) + ", " +
                (L.intermediates ? std::to_string(L.compared) + " values compared" : "outputs only") + "." +
                (L.note.empty() ? "" : " " + L.note);
  } else {
    t.caption = "All " + std::to_string(L.compared) + " linked intermediate values agree (sample " + std::to_string(L.sample) +
                ")." + (L.note.empty() ? "" : " " + L.note);
  }
  if (!L.nodes.empty())
    t.caption += " Graph colors: agrees = every element within rtol/atol; slightly off = fewer than 1% of the "
                 "elements outside (typical of float rounding near zero); differs = more, or shape or NaN differences.";
  r.add_table(std::move(t));
}
#endif

void add_model_notes(HtmlReport& page, const Model& m) {
  for (const ValueInfo& v : m.graph.outputs)
    if (v.type.shape)
      for (size_t i = 0; i < v.type.shape->dims.size(); ++i)
        if (!v.type.shape->dims[i].is_static())
          page.add_note("note", "output " + v.name + " dim " + std::to_string(i) + " stayed symbolic ('" +
                                    (v.type.shape->dims[i].symbol.empty() ? "?" : v.type.shape->dims[i].symbol) +
                                    "'): it followed a dynamic input axis when shapes were learned");
  std::map<std::string, int> custom;
  m.graph.for_each_node([&](const Node& n) {
    if (!n.domain.empty() && n.domain != "ai.onnx") custom[n.domain + "::" + n.op_type]++;
  });
  for (const auto& [op, count] : custom)
    page.add_note("note", "custom op " + op + " (" + std::to_string(count) + " node" + (count == 1 ? "" : "s") +
                              "): a runtime needs its kernel (see --custom-op, --plugin)");
}

void write_report(const HtmlReport& r, const std::string& path, bool quiet) {
  r.write(path);
  if (!quiet) std::printf("wrote report %s\n", path.c_str());
}

}  // namespace t2o::cli
