// How a verify report reads: a table for people, JSON for CI.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "verify/verify.h"

namespace t2o {

namespace {

std::string num(double v, const char* fmt = "%.3g") {
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string special(const TensorStats& s) {
  std::string r;
  if (s.ref_nan || s.got_nan) r += "NaN " + std::to_string(s.ref_nan) + "/" + std::to_string(s.got_nan);
  if (s.ref_inf || s.got_inf) r += std::string(r.empty() ? "" : " ") + "Inf " + std::to_string(s.ref_inf) + "/" + std::to_string(s.got_inf);
  return r.empty() ? "-" : r;
}

std::string shape_text(const TensorStats& s) {
  return s.shape_ok() ? dims_to_string(s.ref_shape) : dims_to_string(s.ref_shape) + "|" + dims_to_string(s.got_shape);
}

std::string dtype_text(const TensorStats& s) {
  return s.dtype_ok() ? std::string(dtype_name(s.ref_dtype))
                      : std::string(dtype_name(s.ref_dtype)) + "|" + std::string(dtype_name(s.got_dtype));
}

std::string row(const std::string& a, const TensorStats& s) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "  %-16s %-14s %-8s %-10s %-10s %-8s %-9s %-13s %s\n", a.c_str(), shape_text(s).c_str(),
                dtype_text(s).c_str(), num(s.max_abs).c_str(), num(s.max_rel).c_str(),
                num(100.0 * s.mismatch_share(), "%.3g%%").c_str(), num(s.cosine, "%.6f").c_str(), special(s).c_str(),
                s.verdict().c_str());
  return buf;
}

std::string value_line(const char* role, const ValueCheck& v) {
  std::string r = std::string("    ") + role + " " + v.onnx_name;
  if (!v.torch_value.empty()) r += " (torch %" + v.torch_value + ")";
  if (v.stats) {
    const TensorStats& s = *v.stats;
    r += ": " + s.verdict() + "; max abs " + num(s.max_abs) + ", max rel " + num(s.max_rel) + ", cosine " +
         num(s.cosine, "%.6f");
    if (special(s) != "-") r += ", " + special(s) + " (torch/onnx)";
  } else {
    r += ": " + v.what;
  }
  return r + "\n";
}

nlohmann::json stats_json(const TensorStats& s) {
  return {{"ok", s.ok()},
          {"verdict", s.verdict()},
          {"shape", s.ref_shape},
          {"onnx_shape", s.got_shape},
          {"dtype", std::string(dtype_name(s.ref_dtype))},
          {"onnx_dtype", std::string(dtype_name(s.got_dtype))},
          {"numel", s.numel},
          {"mismatches", s.mismatches},
          {"mismatch_share", s.mismatch_share()},
          {"max_abs", s.max_abs},
          {"max_rel", s.max_rel},
          {"cosine", s.cosine},
          {"nan", {{"torch", s.ref_nan}, {"onnx", s.got_nan}, {"one_side_only", s.nan_only_one}}},
          {"inf", {{"torch", s.ref_inf}, {"onnx", s.got_inf}}}};
}

nlohmann::json value_json(const ValueCheck& v) {
  nlohmann::json j = {{"onnx_name", v.onnx_name}, {"torch_value", v.torch_value}, {"what", v.what}};
  if (v.stats) j["stats"] = stats_json(*v.stats);
  return j;
}

}  // namespace

std::string format_report(const VerifyReport& r) {
  std::string out = "PyTorch " + r.pt_path + "  vs  " + (r.backend == "ort" ? "ONNX Runtime" : "t2o runtime") + " on " +
                    r.onnx_path + "  (rtol " + num(r.tol.rtol) + ", atol " + num(r.tol.atol) + ", " +
                    std::to_string(r.samples.size()) + " sample" + (r.samples.size() == 1 ? "" : "s") + ")\n";
  char head[256];
  std::snprintf(head, sizeof head, "  %-16s %-14s %-8s %-10s %-10s %-8s %-9s %-13s %s\n", "output", "shape", "dtype",
                "max abs", "max rel", "differ", "cosine", "NaN/Inf t/o", "verdict");
  for (const SampleResult& s : r.samples) {
    out += "\nsample " + std::to_string(s.index) + ":";
    for (const auto& [n, t] : s.inputs)
      out += " " + n + " " + dims_to_string(t.dims()) + " " + std::string(dtype_name(t.dtype())) + ";";
    out.back() = '\n';
    out += head;
    for (const OutputCheck& o : s.outputs) out += row(o.name, o.stats);
    if (!s.problem.empty()) out += "  problem: " + s.problem + "\n";
  }
  for (const std::string& n : r.notes) out += "\nnote: " + n + "\n";
  const LocateResult& L = r.locate;
  if (L.ran) {
    out += "\n";
    if (L.found) {
      out += std::string(r.ok() ? "first node outside tolerance" : "first diverging node") + " (sample " +
             std::to_string(L.sample) + ", " + (L.intermediates ? std::to_string(L.compared) + " values compared" : "outputs only") +
             "):\n";
      out += "  " + L.op_type + " '" + L.node_name + "' (node " + std::to_string(L.node_index) + ")";
      if (!L.aten_op.empty()) out += " from " + L.aten_op;
      if (!L.module.empty()) out += " in " + L.module;
      if (!L.source.empty()) out += " at " + L.source;
      out += "\n";
      for (const ValueCheck& v : L.outputs) out += value_line("out", v);
      for (const ValueCheck& v : L.inputs) out += value_line("in ", v);
    } else {
      out += "locate: all " + std::to_string(L.compared) + " linked intermediate values agree (sample " +
             std::to_string(L.sample) + ")\n";
    }
    if (!L.note.empty()) out += "  note: " + L.note + "\n";
  }
  size_t bad = 0;
  for (const SampleResult& s : r.samples) bad += !s.ok();
  out += "\n";
  if (r.ok()) out += "OK: all outputs agree in " + std::to_string(r.samples.size()) + " sample(s)\n";
  else out += "MISMATCH: " + std::to_string(bad) + " of " + std::to_string(r.samples.size()) + " sample(s) disagree\n";
  return out;
}

std::string report_json(const VerifyReport& r) {
  nlohmann::json j;
  j["ok"] = r.ok();
  j["model"] = r.pt_path;
  j["onnx"] = r.onnx_path;
  j["backend"] = r.backend;
  j["rtol"] = r.tol.rtol;
  j["atol"] = r.tol.atol;
  j["notes"] = r.notes;
  j["samples"] = nlohmann::json::array();
  for (const SampleResult& s : r.samples) {
    nlohmann::json sj = {{"index", s.index}, {"ok", s.ok()}, {"sizes", s.sizes}, {"problem", s.problem}};
    for (const auto& [n, t] : s.inputs)
      sj["inputs"].push_back({{"name", n}, {"shape", t.dims()}, {"dtype", std::string(dtype_name(t.dtype()))}});
    sj["outputs"] = nlohmann::json::array();
    for (const OutputCheck& o : s.outputs) {
      nlohmann::json oj = stats_json(o.stats);
      oj["name"] = o.name;
      sj["outputs"].push_back(oj);
    }
    j["samples"].push_back(sj);
  }
  const LocateResult& L = r.locate;
  if (L.ran) {
    nlohmann::json lj = {{"sample", L.sample}, {"intermediates", L.intermediates}, {"compared", L.compared},
                         {"found", L.found}, {"note", L.note}};
    if (L.found) {
      lj["node"] = {{"index", L.node_index}, {"name", L.node_name}, {"op_type", L.op_type}, {"aten_op", L.aten_op},
                    {"source", L.source}, {"module", L.module}};
      for (const ValueCheck& v : L.outputs) lj["outputs"].push_back(value_json(v));
      for (const ValueCheck& v : L.inputs) lj["inputs"].push_back(value_json(v));
    }
    j["locate"] = lj;
  }
  return j.dump(2) + "\n";
}

}  // namespace t2o
