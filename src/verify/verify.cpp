#include "verify/verify.h"

#include <algorithm>
#include <set>

#include "onnx/model_io.h"
#include "passes/passes.h"
#include "runtime/session.h"
#include "torch/context.h"
#include "torch/profile.h"
#include "verify/inputs.h"
#include "verify/ort_backend.h"
#include "verify/torch_run.h"

namespace t2o {

bool SampleResult::ok() const {
  if (!problem.empty()) return false;
  return std::all_of(outputs.begin(), outputs.end(), [](const OutputCheck& o) { return o.stats.ok(); });
}

bool VerifyReport::ok() const {
  return !samples.empty() && std::all_of(samples.begin(), samples.end(), [](const SampleResult& s) { return s.ok(); });
}

namespace {

std::vector<ValueInfo> removed_infos(const Model& m) {
  std::vector<ValueInfo> r;
  for (const RemovedInput& i : removed_inputs(m)) r.push_back(i.info);
  return r;
}

std::map<std::string, RValue> feeds(const Sample& s) {
  std::map<std::string, RValue> r;
  for (const auto& [n, t] : s.inputs) r[n] = RValue(t);
  return r;
}

// Out of tolerance beats within it; then the larger absolute error.
bool worse(const TensorStats& a, const TensorStats& b) {
  if (a.values_ok() != b.values_ok()) return !a.values_ok();
  return a.max_abs > b.max_abs;
}

// Why the links of a fresh conversion do not describe the given file, or "" when they do.
std::string structure_difference(const Graph& mine, const Graph& given) {
  if (mine.nodes.size() != given.nodes.size())
    return "it has " + std::to_string(given.nodes.size()) + " nodes, a fresh conversion " +
           std::to_string(mine.nodes.size());
  for (size_t i = 0; i < mine.nodes.size(); ++i)
    if (mine.nodes[i].name != given.nodes[i].name || mine.nodes[i].outputs != given.nodes[i].outputs)
      return "node " + std::to_string(i) + " is '" + given.nodes[i].name + "', a fresh conversion has '" +
             mine.nodes[i].name + "'";
  return {};
}

class Verifier {
 public:
  Verifier(const std::string& pt, const std::string& onnx, const VerifyOptions& o)
      : opts_(o), model_(load_model(onnx)), torch_(pt, o.warn ? o.warn : std::function<void(const std::string&)>([](const std::string&) {})),
        plan_(model_.graph, o.inputs, o.dynamic, o.data, removed_infos(model_)) {
    plan_.set_role_values([roles = torch_.input_roles()](const std::string& name, const Dims& dims, DType dtype,
                                                         uint64_t seed, const InputPlan::DimsOf& dims_of)
                              -> std::optional<Tensor> {
      auto r = roles.find(name);
      if (r == roles.end() ||
          (r->second.kind != InputRole::Kind::Lengths && r->second.kind != InputRole::Kind::Offsets))
        return std::nullopt;
      at::manual_seed(seed);
      auto v = role_value(r->second, dims, scalar_type_from_dtype(dtype), dims_of);
      if (!v) return std::nullopt;
      return tensor_from_torch(*v);
    });
    report_.pt_path = pt;
    report_.onnx_path = onnx;
    report_.backend = o.backend;
    report_.tol = o.tol;
    if (o.backend == "ort") require_ort();
    else if (o.backend != "t2o")
      throw Error("unknown backend '" + o.backend + "'", "use --backend t2o or --backend ort", kExitUsage);
    if (o.backend == "t2o") session_.emplace(model_);
  }

  VerifyReport run() {
    int n = std::max(1, opts_.samples);
    for (int k = 0; k < n; ++k) {
      if (opts_.progress) opts_.progress(k, n);
      Sample s = plan_.make(k, opts_.seed);
      TorchRun t;
      try {
        t = torch_.run(s.torch_inputs(), false);
      } catch (const Error& e) {
        if (k == 0) throw;
        // Moved dynamic sizes can be invalid for a model (e.g. a fixed positional table).
        report_.notes.push_back("sample " + std::to_string(k) + " skipped: " + e.what());
        continue;
      }
      const std::vector<Tensor> got = run_onnx(s);
      SampleResult r = compare_sample(k, s, t.outputs, got);
      if (!r.ok() && r.problem.empty()) recheck_torch(k, s, t.outputs, got, r);
      report_.samples.push_back(std::move(r));
      samples_.push_back(std::move(s));
    }
    if (opts_.progress) opts_.progress(n, n);
    bool mismatch = !report_.ok();
    if (mismatch || opts_.locate) {
      size_t pick = 0;
      for (size_t i = 0; i < report_.samples.size(); ++i)
        if (!report_.samples[i].ok()) {
          pick = i;
          break;
        }
      if (!samples_.empty()) locate(report_.samples[pick].index, samples_[pick]);
    }
    return std::move(report_);
  }

 private:
  std::vector<Tensor> run_onnx(const Sample& s) {
    std::vector<std::string> names;
    for (const ValueInfo& o : model_.graph.outputs) names.push_back(o.name);
    got_names_ = names;
    if (opts_.backend == "ort") return run_ort(report_.onnx_path, s.inputs, names);
    auto out = session_->run(feeds(s));
    std::vector<Tensor> r;
    got_names_.clear();
    for (const std::string& n : names) {
      const RValue& v = out.at(n);
      if (v.is_sequence()) {
        // A sequence output (a scripted List[Tensor]) is its tensors in order, as PyTorch's list
        // flattens.
        for (size_t i = 0; i < v.sequence.size(); ++i) {
          r.push_back(v.sequence[i]);
          got_names_.push_back(n + "[" + std::to_string(i) + "]");
        }
        continue;
      }
      if (!v.is_tensor()) throw Error("output '" + n + "' is not a tensor or a sequence of tensors; verify compares those only");
      r.push_back(v.tensor);
      got_names_.push_back(n);
    }
    return r;
  }
  std::vector<std::string> got_names_;  // the compared ONNX outputs of the last run_onnx, sequences expanded

  SampleResult compare_sample(int k, const Sample& s, const std::vector<Tensor>& ref, const std::vector<Tensor>& got) {
    SampleResult r;
    r.index = k;
    r.inputs = s.inputs;
    r.sizes = s.sizes;
    if (ref.size() != got.size())
      r.problem = "PyTorch returns " + std::to_string(ref.size()) + " tensors, the ONNX model " +
                  std::to_string(got.size()) + " outputs";
    for (size_t i = 0; i < std::min(ref.size(), got.size()); ++i)
      r.outputs.push_back({i < got_names_.size() ? got_names_[i] : model_.graph.outputs[i].name,
                           compare_tensors(ref[i], got[i], opts_.tol),
                           abs_diff_histogram(ref[i], got[i]), sample_pairs(ref[i], got[i])});
    return r;
  }

  // PyTorch runs the sample's inputs once more when an output disagrees. Where PyTorch's two
  // results differ from each other (a random op, or an op that reads memory it did not write:
  // torch 1.13's baddbmm with beta = 0 sometimes returns a NaN of its fresh output buffer) and the
  // ONNX output matches the second, that output counts as matching and the report says so.
  // Outputs that match neither stay mismatches.
  void recheck_torch(int k, const Sample& s, const std::vector<Tensor>& first, const std::vector<Tensor>& got,
                     SampleResult& r) {
    TorchRun again;
    try {
      again = torch_.run(s.torch_inputs(), false);
    } catch (const Error&) {
      return;
    }
    if (again.outputs.size() != first.size()) return;
    for (size_t i = 0; i < r.outputs.size(); ++i) {
      OutputCheck& o = r.outputs[i];
      if (o.stats.ok() || compare_tensors(first[i], again.outputs[i], opts_.tol).ok()) continue;
      TensorStats second = compare_tensors(again.outputs[i], got[i], opts_.tol);
      if (!second.ok()) continue;
      report_.notes.push_back("sample " + std::to_string(k) + ", output " + o.name +
                              ": PyTorch gave another result on a second run of the same inputs (" +
                              o.stats.verdict() + " against the first); the ONNX output matches the second");
      o = {o.name, second, abs_diff_histogram(again.outputs[i], got[i]), sample_pairs(again.outputs[i], got[i])};
    }
  }

  // Links for the given file: passed in, or from converting again the way it was converted.
  std::optional<std::vector<ValueLink>> links(std::string& why_not) {
    if (opts_.links) return opts_.links;
    if (model_.producer_name != "torch2onnx") {
      why_not = "the ONNX model was not made by torch2onnx (producer '" + model_.producer_name + "')";
      return std::nullopt;
    }
    ConvertOptions co;
    co.opset = static_cast<int>(model_.opset());
    co.inputs = plan_.convert_inputs();
    co.dynamic = plan_.convert_dynamic();
    for (const ValueInfo& o : model_.graph.outputs) co.output_names.push_back(o.name);
    try {
      ConvertResult cr = convert_torchscript(report_.pt_path, co);
      std::string diff = structure_difference(cr.model.graph, model_.graph);
      if (!diff.empty()) {
        // `convert` optimizes unless --no-optimize; the optimizer is deterministic and keeps the
        // values of the names that remain, so the links hold for its result too.
        std::map<std::string, Dims> sizes;
        for (const auto& in : co.inputs) sizes[in.name] = in.dims;
        Model opt = cr.model;
        optimize_converted(opt, sizes, {}, {});
        remove_unused_inputs(opt);
        if (structure_difference(opt.graph, model_.graph).empty()) return cr.links;
      }
      if (!diff.empty()) {
        why_not = "the ONNX file does not match a fresh conversion of the .pt (" + diff + ")";
        return std::nullopt;
      }
      return cr.links;
    } catch (const Error& e) {
      why_not = std::string("converting again to link values failed: ") + e.what();
      return std::nullopt;
    }
  }

  void fill_node(LocateResult& L, size_t i) {
    const Node& n = model_.graph.nodes[i];
    L.found = true;
    L.node_index = static_cast<int>(i);
    L.node_name = n.name;
    L.op_type = n.op_type;
    NodeOrigin o = parse_node_origin(n.doc_string);
    L.source = o.source;
    L.aten_op = o.aten_op;
    L.module = o.module;
  }

  void locate(int sample_index, const Sample& s) {
    LocateResult& L = report_.locate;
    L.ran = true;
    L.sample = sample_index;
    std::string why_not;
    auto lk = links(why_not);
    if (!lk) {
      L.note = why_not + "; located by outputs only";
      locate_by_outputs(sample_index);
      return;
    }
    L.intermediates = true;
    if (opts_.backend == "ort") L.note = "intermediate values come from the t2o runtime (ONNX Runtime gives outputs only)";
    std::map<std::string, const ValueLink*> by_onnx;
    for (const ValueLink& l : *lk)
      if (!torch_.mutated().count(l.torch_value)) by_onnx.emplace(l.onnx_name, &l);
    TorchRun t = torch_.run(s.torch_inputs(), true);
    Session sess(model_);
    std::map<std::string, RValue> all = sess.run_all(feeds(s));
    auto check = [&](const std::string& name, ValueCheck& vc) {
      vc.onnx_name = name;
      auto l = by_onnx.find(name);
      if (l != by_onnx.end()) vc.torch_value = l->second->torch_value;
      if (model_.graph.find_initializer(name)) vc.what = "initializer";
      else if (model_.graph.find_input(name)) vc.what = "model input";
      if (l == by_onnx.end()) {
        if (vc.what.empty()) vc.what = "no TorchScript counterpart";
        return;
      }
      auto tv = t.values.find(l->second->torch_value);
      auto ov = all.find(name);
      if (tv == t.values.end() || ov == all.end() || !ov->second.is_tensor()) {
        if (vc.what.empty()) vc.what = "not captured";
        return;
      }
      vc.stats = compare_tensors(tv->second, ov->second.tensor, opts_.tol);
    };
    for (size_t i = 0; i < model_.graph.nodes.size(); ++i) {
      const Node& n = model_.graph.nodes[i];
      std::vector<ValueCheck> outs;
      bool bad = false;
      NodeCheck nc{static_cast<int>(i), n.name, std::nullopt};
      for (const std::string& o : n.outputs) {
        if (o.empty()) continue;
        ValueCheck vc;
        check(o, vc);
        if (vc.stats) {
          ++L.compared;
          bad = bad || !vc.stats->values_ok();
          if (!nc.worst || worse(*vc.stats, *nc.worst)) nc.worst = vc.stats;
        }
        outs.push_back(vc);
      }
      if (opts_.all_nodes) L.nodes.push_back(nc);
      if (!bad || L.found) continue;
      fill_node(L, i);
      L.outputs = outs;
      for (const std::string& in : n.inputs) {
        if (in.empty()) continue;
        ValueCheck vc;
        check(in, vc);
        L.inputs.push_back(vc);
      }
      if (!opts_.all_nodes) return;
    }
    if (!report_.ok() && !L.found)
      L.note += std::string(L.note.empty() ? "" : "; ") +
                "no linked intermediate value diverges, only the outputs (look at the output nodes)";
  }

  // Without links: the node that produces the first mismatching output.
  void locate_by_outputs(int sample_index) {
    LocateResult& L = report_.locate;
    const SampleResult* sr = nullptr;
    for (const SampleResult& s : report_.samples)
      if (s.index == sample_index) sr = &s;
    if (!sr) return;
    for (const OutputCheck& oc : sr->outputs) {
      if (oc.stats.ok()) continue;
      for (size_t i = 0; i < model_.graph.nodes.size(); ++i) {
        const Node& n = model_.graph.nodes[i];
        if (std::find(n.outputs.begin(), n.outputs.end(), oc.name) == n.outputs.end()) continue;
        fill_node(L, i);
        L.outputs.push_back({oc.name, {}, "model output", oc.stats});
        return;
      }
    }
  }

  const VerifyOptions& opts_;
  Model model_;
  TorchModel torch_;
  InputPlan plan_;
  std::optional<Session> session_;
  VerifyReport report_;
  std::vector<Sample> samples_;  // kept for locate, parallel to report_.samples
};

}  // namespace

VerifyReport verify_model(const std::string& pt_path, const std::string& onnx_path, const VerifyOptions& opts) {
  if (opts.samples < 1) throw Error("--samples must be at least 1", {}, kExitUsage);
  Verifier v(pt_path, onnx_path, opts);
  return v.run();
}

}  // namespace t2o
