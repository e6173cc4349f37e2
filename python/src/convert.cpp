// convert / verify / optimize / the Triton bundle for the Python package. Conversion runs in this
// process through src/torch (convert_torchscript), exactly as `torch2onnx convert` does.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "arrays.h"
#include "cli/report_content.h"
#include "module.h"
#include "onnx/check.h"
#include "onnx/model_io.h"
#include "serve/triton.h"
#include "torch/convert.h"
#include "verify/verify.h"
#if __has_include("passes/passes.h")
#include "passes/passes.h"
#define T2O_HAVE_OPTIMIZER 1
#endif

namespace t2o::pyext {

namespace {

// A warning callback that may be called from C++ while the GIL is released.
std::function<void(const std::string&)> python_warn(const pyb::object& warn) {
  if (warn.is_none()) return {};
  auto fn = std::make_shared<pyb::object>(warn);
  return [fn](const std::string& w) {
    pyb::gil_scoped_acquire locked;
    (*fn)(w);
  };
}

void rename_in(Graph& g, const std::string& from, const std::string& to) {
  for (Node& n : g.nodes) {
    for (auto& i : n.inputs)
      if (i == from) i = to;
    for (Attribute& a : n.attributes) {
      // A subgraph that declares the name itself shadows the outer value.
      auto visit = [&](Graph& sub) {
        for (const auto& vi : sub.inputs)
          if (vi.name == from) return;
        rename_in(sub, from, to);
      };
      if (a.g) visit(*a.g);
      for (auto& sg : a.graphs) visit(*sg);
    }
  }
  for (ValueInfo& o : g.outputs)
    if (o.name == from) o.name = to;
}

// A converted model, kept in C++ until it is written: renaming, output labels, optimization and
// the Triton bundle work on it without a round trip through protobuf.
struct Converted {
  Model model;
  std::vector<std::string> warnings, notes;
  std::vector<ValueLink> links;
  std::vector<std::string> keep_inputs;  // ConvertResult::keep_inputs, under the current names
#ifdef T2O_HAVE_OPTIMIZER
  std::optional<OptimizeReport> optimization;  // the optimizer's report once it ran, for the HTML page
#endif

  // The model's inputs in the order they had when converted: (name, removed as unread).
  std::vector<std::pair<std::string, bool>> all_inputs() const {
    std::vector<std::pair<std::string, bool>> r;
    for (const ValueInfo* vi : model.graph.runtime_inputs()) r.emplace_back(vi->name, false);
#ifdef T2O_HAVE_OPTIMIZER
    std::vector<RemovedInput> gone = removed_inputs(model);
    std::sort(gone.begin(), gone.end(), [](const auto& a, const auto& b) { return a.position < b.position; });
    for (const RemovedInput& g : gone)
      if (g.position >= 0 && static_cast<size_t>(g.position) <= r.size())
        r.insert(r.begin() + g.position, {g.info.name, true});
#endif
    return r;
  }

  // Graph inputs get the given names, in order (torch.onnx's input_names); the order counts the
  // inputs removed as unread too.
  void rename_inputs(const std::vector<std::string>& names) {
    std::vector<std::pair<std::string, bool>> ins = all_inputs();
    if (names.size() > ins.size())
      throw Error(std::to_string(names.size()) + " input names for " + std::to_string(ins.size()) + " model inputs",
                  "give at most one name per tensor in args, flattened depth-first", kExitUsage);
    std::set<std::string> taken;
    for (const Initializer& i : model.graph.initializers) taken.insert(i.name);
    for (const Node& n : model.graph.nodes) taken.insert(n.outputs.begin(), n.outputs.end());
    for (size_t k = names.size(); k < ins.size(); ++k) taken.insert(ins[k].first);  // inputs keeping theirs
    std::set<std::string> seen;
    for (const auto& n : names) {
      if (!seen.insert(n).second) throw Error("input name '" + n + "' is given twice", {}, kExitUsage);
      if (taken.count(n)) throw Error("input name '" + n + "' is already a value of the model", "choose another", kExitUsage);
    }
    // Through fresh temporary names, so swapping two names works.
    std::map<std::string, std::string> removed_names;
    std::vector<size_t> kept;
    for (size_t k = 0; k < names.size(); ++k) {
      if (ins[k].second) removed_names[ins[k].first] = names[k];
      else kept.push_back(k);
    }
    for (size_t k : kept) rename_value_everywhere(ins[k].first, "\x01" + std::to_string(k));
    for (size_t k : kept) rename_value_everywhere("\x01" + std::to_string(k), names[k]);
#ifdef T2O_HAVE_OPTIMIZER
    if (!removed_names.empty()) {
      std::vector<RemovedInput> gone = removed_inputs(model);
      for (RemovedInput& g : gone)
        if (auto it = removed_names.find(g.info.name); it != removed_names.end()) g.info.name = it->second;
      set_removed_inputs(model, gone);
    }
#endif
  }

  void rename_value_everywhere(const std::string& from, const std::string& to) {
    for (ValueInfo& vi : model.graph.inputs)
      if (vi.name == from) vi.name = to;
    rename_in(model.graph, from, to);
    for (ValueLink& l : links)
      if (l.onnx_name == from) l.onnx_name = to;
    for (std::string& k : keep_inputs)
      if (k == from) k = to;
  }

  // Marks axes of a graph output symbolic under the given labels (torch.onnx's dynamic_axes for
  // outputs). Returns the axes that were static in the conversion (the label then only names them).
  std::vector<int> set_output_dims(const std::string& name, const std::map<int, std::string>& axes) {
    for (ValueInfo& o : model.graph.outputs) {
      if (o.name != name) continue;
      if (o.type.kind != Type::Kind::Tensor || !o.type.shape)
        throw Error("output '" + name + "' has no known rank to label axes of", {}, kExitUsage);
      std::vector<int> was_static;
      Shape& s = *o.type.shape;
      for (const auto& [axis, label] : axes) {
        int a = axis < 0 ? axis + s.rank() : axis;
        if (a < 0 || a >= s.rank())
          throw Error("dynamic_axes['" + name + "']: axis " + std::to_string(axis) + " is out of range for rank " +
                          std::to_string(s.rank()),
                      {}, kExitUsage);
        if (s.dims[static_cast<size_t>(a)].is_static()) was_static.push_back(a);
        s.dims[static_cast<size_t>(a)] = Dim::named(label);
      }
      return was_static;
    }
    throw Error("dynamic_axes names '" + name + "', which is neither an input nor an output of the model", {},
                kExitUsage);
  }

  pyb::list values(const std::vector<const ValueInfo*>& vs) const {
    pyb::list l;
    for (const ValueInfo* vi : vs) {
      pyb::list shape;
      if (vi->type.shape)
        for (const Dim& d : vi->type.shape->dims)
          shape.append(d.is_static() ? pyb::object(pyb::int_(d.value))
                                     : d.is_symbolic() ? pyb::object(pyb::str(d.symbol)) : pyb::object(pyb::none()));
      l.append(pyb::make_tuple(vi->name, ort_type_name(vi->type), shape));
    }
    return l;
  }
};

ConvertOptions convert_options(const pyb::dict& kw, std::vector<pyb::object>& keep) {
  ConvertOptions o;
  if (kw.contains("opset")) o.opset = kw["opset"].cast<int>();
  if (kw.contains("inputs"))
    for (const pyb::handle& spec : kw["inputs"]) {
      auto t = spec.cast<std::tuple<std::string, std::vector<int64_t>, std::string>>();
      DType dt = dtype_from_name(std::get<2>(t));
      if (dt == DType::Undefined) throw Error("unknown element type '" + std::get<2>(t) + "'", {}, kExitUsage);
      o.inputs.push_back({std::get<0>(t), std::get<1>(t), dt});
    }
  if (kw.contains("data"))
    for (const auto& [k, v] : kw["data"].cast<pyb::dict>()) {
      std::string name = pyb::str(k);
      pyb::object hold;
      o.data[name] = borrow_array(v, "example value '" + name + "'", hold);
      keep.push_back(hold);
    }
  if (kw.contains("dynamic"))
    for (const auto& [k, v] : kw["dynamic"].cast<pyb::dict>())
      o.dynamic.push_back({pyb::str(k), v.cast<std::map<int, std::string>>()});
  if (kw.contains("quantized"))
    o.quantized = kw["quantized"].cast<std::map<std::string, std::pair<double, int64_t>>>();
  if (kw.contains("output_names")) o.output_names = kw["output_names"].cast<std::vector<std::string>>();
  if (kw.contains("custom_ops")) o.custom_ops = kw["custom_ops"].cast<std::vector<std::string>>();
  if (kw.contains("plugins")) o.plugins = kw["plugins"].cast<std::vector<std::string>>();
  if (kw.contains("weights")) o.weights = kw["weights"].cast<std::string>();
  if (kw.contains("warn")) o.warn = python_warn(kw["warn"]);
  if (kw.contains("training")) o.training = kw["training"].cast<bool>();
  return o;
}

// Symbolics that emit standard ops name the default domain "ai.onnx" (the custom-op path needs a
// domain); ONNX spells it "" in nodes.
void default_domain(Graph& g) {
  for (Node& n : g.nodes) {
    if (n.domain == "ai.onnx") n.domain.clear();
    for (Attribute& a : n.attributes) {
      if (a.g) default_domain(*a.g);
      for (auto& sg : a.graphs) default_domain(*sg);
    }
  }
}

Converted convert(const std::string& pt_path, const pyb::kwargs& kw) {
  std::vector<pyb::object> keep;
  ConvertOptions o = convert_options(kw, keep);
  Converted c;
  {
    pyb::gil_scoped_release unlocked;
    ConvertResult r = convert_torchscript(pt_path, o);
    default_domain(r.model.graph);
    // A model that fails the checker is never handed out (as in `torch2onnx convert`).
    try {
      check_model(r.model);
    } catch (const Error& e) {
      throw Error(std::string("the converted model does not pass the ONNX checker: ") + e.what(),
                  "this is a torch2onnx bug; please report it with the model", kExitUnsupported);
    }
    c.model = std::move(r.model);
    c.warnings = std::move(r.warnings);
    c.notes = std::move(r.notes);
    c.links = std::move(r.links);
    c.keep_inputs = std::move(r.keep_inputs);
  }
  return c;
}

pyb::dict verify(const std::string& pt_path, const std::string& onnx_path, const pyb::kwargs& kw) {
  VerifyOptions o;
  if (kw.contains("inputs"))
    for (const pyb::handle& spec : kw["inputs"]) {
      auto t = spec.cast<std::tuple<std::string, std::vector<int64_t>, std::string>>();
      o.inputs.push_back({std::get<0>(t), std::get<1>(t), dtype_from_name(std::get<2>(t))});
    }
  if (kw.contains("data_files")) o.data = kw["data_files"].cast<std::map<std::string, std::string>>();
  if (kw.contains("dynamic"))
    for (const auto& [k, v] : kw["dynamic"].cast<pyb::dict>())
      o.dynamic.push_back({pyb::str(k), v.cast<std::map<int, std::string>>()});
  if (kw.contains("samples")) o.samples = kw["samples"].cast<int>();
  if (kw.contains("rtol")) o.tol.rtol = kw["rtol"].cast<double>();
  if (kw.contains("atol")) o.tol.atol = kw["atol"].cast<double>();
  if (kw.contains("locate")) o.locate = kw["locate"].cast<bool>();
  if (kw.contains("backend")) o.backend = kw["backend"].cast<std::string>();
  if (kw.contains("seed")) o.seed = kw["seed"].cast<uint64_t>();
  o.warn = kw.contains("warn") ? python_warn(kw["warn"]) : std::function<void(const std::string&)>{};
  if (!o.warn) o.warn = [](const std::string&) {};
  VerifyReport r;
  std::string text, json;
  {
    pyb::gil_scoped_release unlocked;
    r = verify_model(pt_path, onnx_path, o);
    text = format_report(r);
    json = report_json(r);
  }
  if (kw.contains("page") && !kw["page"].is_none()) {
    HtmlReport& page = kw["page"].cast<HtmlReport&>();
    pyb::gil_scoped_release unlocked;
    cli::add_verify_content(page, r, load_model(onnx_path));
  }
  pyb::dict d;
  d["ok"] = r.ok();
  d["text"] = text;
  d["json"] = json;
  pyb::list outs;
  for (const SampleResult& s : r.samples)
    for (const OutputCheck& c : s.outputs) {
      pyb::dict e;
      e["sample"] = s.index;
      e["name"] = c.name;
      e["ok"] = c.stats.ok();
      e["max_abs"] = c.stats.max_abs;
      e["max_rel"] = c.stats.max_rel;
      e["mismatches"] = c.stats.mismatches;
      e["verdict"] = c.stats.verdict();
      outs.append(e);
    }
  d["outputs"] = outs;
  return d;
}

#ifdef T2O_HAVE_OPTIMIZER
pyb::dict report_dict(const OptimizeReport& r) {
  pyb::dict d;
  d["nodes_before"] = r.nodes_before;
  d["nodes_after"] = r.nodes_after;
  d["verified"] = r.verified;
  d["not_verified"] = r.not_verified;
  pyb::list passes;
  for (const PassStats& p : r.passes) passes.append(pyb::make_tuple(p.name, p.rewrites, p.rolled_back));
  d["passes"] = passes;
  d["warnings"] = r.warnings;
  return d;
}
#endif

}  // namespace

void init_convert(pyb::module_& m) {
  // The page `torch2onnx convert --report` writes, filled step by step by torch2onnx.export.
  pyb::class_<HtmlReport>(m, "Report")
      .def(pyb::init<std::string>(), pyb::arg("title"))
      .def("fact", &HtmlReport::add_fact, pyb::arg("key"), pyb::arg("value"))
      .def("stage", &HtmlReport::add_stage, pyb::arg("name"), pyb::arg("ms"))
      .def("note", &HtmlReport::add_note, pyb::arg("kind"), pyb::arg("text"),
           "kind: error, warning, repair or note")
      .def("describe", [](HtmlReport& page, const Converted& c) {
#ifdef T2O_HAVE_OPTIMIZER
        if (c.optimization) cli::add_optimize_content(page, *c.optimization);
#endif
        cli::add_model_notes(page, c.model);
        page.set_model(c.model);
      }, pyb::arg("model"), "The converted model's graph, optimizer passes and notes on its outputs and custom ops.")
      .def("write", [](const HtmlReport& page, const std::string& path) {
        pyb::gil_scoped_release unlocked;
        page.write(path);
      }, pyb::arg("path"), "Writes the self-contained HTML page (atomically).");

  pyb::class_<Converted>(m, "ConvertedModel")
      .def_readonly("warnings", &Converted::warnings)
      .def_readonly("notes", &Converted::notes)
      .def_property_readonly("inputs", [](const Converted& c) { return c.values(c.model.graph.runtime_inputs()); })
      .def_property_readonly("outputs", [](const Converted& c) {
        std::vector<const ValueInfo*> v;
        for (const ValueInfo& o : c.model.graph.outputs) v.push_back(&o);
        return c.values(v);
      })
      .def_property_readonly("node_count", [](const Converted& c) { return c.model.graph.nodes.size(); })
      .def_property_readonly("parameter_count", [](const Converted& c) { return c.model.graph.parameter_count(); })
      .def_property_readonly("opset", [](const Converted& c) { return c.model.opset(); })
      .def("rename_inputs", &Converted::rename_inputs, pyb::arg("names"))
      .def_property_readonly("all_inputs", &Converted::all_inputs)
      .def("remove_unused_inputs", [](Converted& c) {
        std::vector<std::pair<std::string, std::string>> r;
#ifdef T2O_HAVE_OPTIMIZER
        for (const RemovedInput& g : remove_unused_inputs(c.model, c.keep_inputs)) r.emplace_back(g.info.name, unused_input_note(g.info.name));
#endif
        return r;
      }, "Removes inputs the model does not read (as torch.onnx does); returns (name, note) for each.")
      .def("set_output_dims", &Converted::set_output_dims, pyb::arg("name"), pyb::arg("axes"))
      .def("initializers_as_inputs", [](Converted& c) {
        // torch.onnx's keep_initializers_as_inputs=True: every weight is also a graph input (after
        // the model's own), so a runtime may be fed other values; its initializer is the default.
        std::set<std::string> listed;
        for (const ValueInfo& vi : c.model.graph.inputs) listed.insert(vi.name);
        for (const Initializer& i : c.model.graph.initializers)
          if (listed.insert(i.name).second)
            c.model.graph.inputs.push_back({i.name, Type::tensor(i.tensor.dtype(), Shape::of(i.tensor.dims())), {}});
      }, "Lists every initializer as a graph input too (torch.onnx's keep_initializers_as_inputs=True).")
      .def("save", [](const Converted& c, const std::string& path) {
        pyb::gil_scoped_release unlocked;
        save_model(c.model, path);
      }, pyb::arg("path"), "Writes the model atomically (external data when over 2 GB).")
      .def("to_bytes", [](const Converted& c) { return pyb::bytes(save_model_to_bytes(c.model)); })
      .def("optimize", [](Converted& c, const pyb::dict& data, const pyb::object& warn) -> pyb::object {
#ifdef T2O_HAVE_OPTIMIZER
        std::map<std::string, Dims> sizes;
        std::map<std::string, Tensor> values;
        std::vector<pyb::object> keep;
        for (const auto& [k, v] : data) {
          pyb::object hold;
          Tensor t = borrow_array(v, "example value '" + std::string(pyb::str(k)) + "'", hold);
          keep.push_back(hold);
          sizes[pyb::str(k)] = t.dims();
          values[pyb::str(k)] = t;
        }
        auto w = python_warn(warn);
        OptimizeReport r;
        {
          pyb::gil_scoped_release unlocked;
          r = optimize_converted(c.model, sizes, values, w ? w : [](const std::string&) {});
        }
        c.optimization = r;
        return report_dict(r);
#else
        (void)c, (void)data, (void)warn;
        return pyb::none();
#endif
      }, pyb::arg("data"), pyb::arg("warn") = pyb::none(),
         "Runs the ONNX optimizer (src/passes) proven on these example values; None when this build has none.")
      .def("write_triton", [](const Converted& c, const std::string& repo, const std::string& name, int max_batch) {
        TritonOptions o;
        o.name = name;
        o.max_batch = max_batch;
        TritonBundle b = write_triton_repo(c.model, repo, o);
        pyb::dict d;
        d["model_dir"] = b.model_dir;
        d["config"] = b.config_path;
        d["model"] = b.model_path;
        d["manifest"] = b.manifest_path;
        d["max_batch_size"] = b.max_batch_size;
        d["batch_dim"] = b.batch_dim;
        return d;
      }, pyb::arg("repo"), pyb::arg("name"), pyb::arg("max_batch") = -1);

  m.def("convert", &convert, pyb::arg("pt_path"),
        "Converts a TorchScript file; keyword options as ConvertOptions (opset, inputs, data, dynamic, "
        "output_names, custom_ops, plugins, weights, warn).");
  m.def("verify", &verify, pyb::arg("pt_path"), pyb::arg("onnx_path"),
        "Runs PyTorch and the ONNX model on the same inputs and compares (the `torch2onnx verify` code path).");
  m.def("load_model_info", [](const std::string& path) {
    Converted c;
    {
      pyb::gil_scoped_release unlocked;
      c.model = load_model(path);
    }
    return c;
  }, pyb::arg("path"), "Reads an .onnx file into the same object `convert` returns (no warnings or notes).");
  m.def("serving_name", &serving_name, pyb::arg("file"));
#ifdef T2O_HAVE_OPTIMIZER
  m.attr("has_optimizer") = true;
  m.def("optimize_file", [](const std::string& in, const std::string& out, int level, const std::vector<std::string>& passes,
                            bool verify) {
    OptimizeOptions o;
    o.level = level;
    o.passes = passes;
    o.verify = verify;
    OptimizeReport r;
    {
      pyb::gil_scoped_release unlocked;
      Model m = load_model(in);
      r = optimize(m, o);
      save_model(m, out);
    }
    return report_dict(r);
  }, pyb::arg("input"), pyb::arg("output"), pyb::arg("level") = 2, pyb::arg("passes") = std::vector<std::string>{},
     pyb::arg("verify") = true);
#else
  m.attr("has_optimizer") = false;
#endif
}

}  // namespace t2o::pyext
