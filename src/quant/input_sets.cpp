// Input sets for calibration and evaluation: read from .npy/.pb files or generated.
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "onnx/tensor_io.h"
#include "passes/prove.h"
#include "quant/quant.h"
#include "runtime/value_io.h"

namespace fs = std::filesystem;

namespace t2o {

namespace {

bool tensor_file(const fs::path& p) { return p.extension() == ".npy" || p.extension() == ".pb"; }

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> r;
  for (const auto& e : fs::directory_iterator(dir)) r.push_back(e.path());
  std::sort(r.begin(), r.end());
  return r;
}

// Whether t can feed input vi: same dtype, rank and static dims.
std::string misfit(const ValueInfo& vi, const Dims& d, DType t) {
  if (t != vi.type.elem)
    return "is " + std::string(dtype_name(t)) + ", the input is " + std::string(dtype_name(vi.type.elem));
  if (!vi.type.shape) return {};
  const Shape& s = *vi.type.shape;
  if (static_cast<int>(d.size()) != s.rank())
    return "has shape " + dims_to_string(d) + ", the input is " + s.to_string();
  for (int a = 0; a < s.rank(); ++a)
    if (s.dims[static_cast<size_t>(a)].is_static() && s.dims[static_cast<size_t>(a)].value != d[static_cast<size_t>(a)])
      return "has shape " + dims_to_string(d) + ", the input is " + s.to_string();
  return {};
}

// One file for input vi: one set, or one per entry of the first axis when the file has one more axis.
std::vector<Tensor> sets_from_file(const ValueInfo& vi, const fs::path& p) {
  Tensor t = bfloat16_stored_as_uint16(read_tensor_file(p.string()), vi.type.elem);
  std::string why = misfit(vi, t.dims(), t.dtype());
  if (why.empty()) return {t};
  if (vi.type.shape && t.rank() == vi.type.shape->rank() + 1 && t.dim(0) > 0) {
    Dims d(t.dims().begin() + 1, t.dims().end());
    if (misfit(vi, d, t.dtype()).empty()) {
      std::vector<Tensor> r;
      size_t bytes = t.nbytes() / static_cast<size_t>(t.dim(0));
      for (int64_t k = 0; k < t.dim(0); ++k) {
        Tensor one(t.dtype(), d);
        std::memcpy(one.raw(), static_cast<const char*>(t.raw()) + static_cast<size_t>(k) * bytes, bytes);
        r.push_back(std::move(one));
      }
      return r;
    }
  }
  throw InputError("'" + p.string() + "' " + why + " (input '" + vi.name + "')",
                   "give one input set per file, or a stack of sets along a new first axis");
}

// A folder holding one file per input (NAME.npy, NAME.pb or input_K.pb), or nullopt.
std::optional<InputSet> named_set(const std::vector<const ValueInfo*>& ins, const fs::path& dir) {
  InputSet set;
  for (size_t k = 0; k < ins.size(); ++k) {
    std::optional<fs::path> found;
    for (const std::string& f : {ins[k]->name + ".npy", ins[k]->name + ".pb", "input_" + std::to_string(k) + ".pb",
                                 "input_" + std::to_string(k) + ".npy"})
      if (fs::is_regular_file(dir / f)) {
        found = dir / f;
        break;
      }
    if (!found) return std::nullopt;
    Tensor t = bfloat16_stored_as_uint16(read_tensor_file(found->string()), ins[k]->type.elem);
    if (std::string why = misfit(*ins[k], t.dims(), t.dtype()); !why.empty())
      throw InputError("'" + found->string() + "' " + why + " (input '" + ins[k]->name + "')",
                       "each file of an input set holds that input as the model takes it");
    set[ins[k]->name] = t;
  }
  return set;
}

}  // namespace

std::vector<InputSet> load_input_sets(const Model& m, const std::vector<std::string>& paths) {
  std::vector<const ValueInfo*> ins = m.graph.runtime_inputs();
  if (ins.empty()) throw InputError("the model has no inputs to feed");
  std::vector<InputSet> sets;
  auto single = [&](const fs::path& p) {
    if (ins.size() != 1)
      throw InputError("'" + p.string() + "' is one tensor but the model has " + std::to_string(ins.size()) + " inputs",
                       "give a folder per input set holding NAME.npy for every input");
    for (Tensor& t : sets_from_file(*ins[0], p)) sets.push_back({{ins[0]->name, std::move(t)}});
  };
  for (const std::string& path : paths) {
    fs::path p(path);
    if (fs::is_regular_file(p)) {
      if (!tensor_file(p)) throw InputError("'" + path + "' is not a .npy or .pb file");
      single(p);
      continue;
    }
    if (!fs::is_directory(p)) throw InputError("'" + path + "' does not exist", "give .npy/.pb files or folders of them");
    size_t before = sets.size();
    if (auto s = named_set(ins, p)) {
      sets.push_back(std::move(*s));
      continue;
    }
    for (const fs::path& e : sorted_entries(p)) {
      if (fs::is_directory(e)) {
        auto s = named_set(ins, e);
        if (!s) throw InputError("folder '" + e.string() + "' lacks a file for some input",
                                 "name files after the inputs (" + ins[0]->name + ".npy, ...) or input_0.pb, input_1.pb, ...");
        sets.push_back(std::move(*s));
      } else if (tensor_file(e)) {
        single(e);
      }
    }
    if (sets.size() == before) throw InputError("folder '" + path + "' holds no input sets (.npy or .pb files)");
  }
  return sets;
}

std::vector<InputSet> generate_input_sets(const Model& m, int n, uint64_t seed, int threads,
                                          const std::map<std::string, Dims>& sizes) {
  // Every set at the sizes of the first (the proof's later samples move dynamic sizes, and a
  // growing batch would make evaluation cost grow with the number of sets).
  OptimizeOptions o;
  o.samples = 1;
  o.threads = threads;
  o.input_sizes = sizes;
  std::vector<InputSet> sets;
  for (int k = 0; k < n; ++k) {
    o.seed = seed + static_cast<uint64_t>(k);
    passes::Prover p(m, o);
    if (!p.unusable().empty())
      throw Error("cannot generate inputs: " + p.unusable(), "give input sets as .npy files (--calibrate, --eval)");
    InputSet s;
    for (const auto& [name, v] : p.feeds().at(0))
      if (v.is_tensor()) s[name] = v.tensor, o.input_sizes[name] = v.tensor.dims();
    sets.push_back(std::move(s));
  }
  return sets;
}

}  // namespace t2o
