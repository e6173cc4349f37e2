#pragma once
// What converters see: the value map from TorchScript values to ONNX names or compile-time
// constants, typed accessors for node arguments, and the builder.
#include <torch/script.h>

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "torch/builder.h"
#include "torch/profile.h"

namespace t2o {

using TNode = torch::jit::Node;
using TValue = torch::jit::Value;

// A converted value: known at conversion time (Const), an ONNX tensor, or a list/tuple of such.
struct TV {
  enum class Kind { Unset, Const, Tensor, List } kind = Kind::Unset;
  c10::IValue c;
  std::string name;
  DType dtype = DType::Undefined;
  std::vector<int64_t> shape;  // -1: dynamic
  bool rank_known = false;
  int rank_seen = -1;   // rank in the first profiling run, when the runs disagreed (rank_known false)
  // A quantized tensor (ops/quantized.cpp): `name` is its integer tensor (dtype: the storage type),
  // `qscale` a float scale and `qzero` a zero point of the storage type, 0-d or, per channel, 1-D
  // along `qaxis`. Empty qscale: not quantized.
  std::string qscale, qzero;
  int64_t qaxis = -1;
  bool number = false;  // a TorchScript int/float/bool carried as a 0-d tensor
  bool poisoned = false;  // produced by an unsupported op: dependents are skipped, not converted
  bool sequence = false;  // Tensor kind naming an ONNX sequence (a list of tensors built in a Loop or If)
  // A packed sequence's data (torch: the valid steps of every sequence, concatenated) held as the
  // padded time-major tensor [T, B, ...] with the sequences' lengths (1-D int64) beside it; only
  // the RNN and pad_packed converters read it. batch_sizes values are real tensors and keep the
  // lengths here too.
  bool packed = false;
  std::string lengths;
  // An Optional[Tensor] that control flow may leave None: `has` names a 0-d bool telling whether it
  // holds a tensor, and `name` the tensor (an empty placeholder when it does not). Empty: a tensor.
  std::string has;
  std::vector<TV> items;
  // A TorchScript dict: List kind with the key of each item, in insertion order as Python keeps it;
  // `name` holds the ONNX graph it was built in, the only one where changing it is a plain update.
  bool dict = false;
  std::vector<c10::IValue> keys;
  // A dict's (or object's) identity: TorchScript dicts are shared, so a change made through one
  // value (`result[i]["boxes"] = b`, a dict the list `result` holds) is seen through every other.
  // Ctx::shared holds the current state of each; 0: none.
  int64_t ref = 0;
  // An element of a list built from another list (`[rc_mask, query_mask]`): TorchScript lists are
  // shared, so appends to that list after the outer one was built show through it. Readers of the
  // outer list's items take the aliased value's current state (items_of / list_index).
  const TValue* alias = nullptr;
  // A nested tensor (nn.TransformerEncoder's fast path with a padding mask) held padded, (B, T, ...)
  // with zeros at the padding: `nested` names the (B, T) bool tensor of the valid positions.
  std::string nested;

  static TV constant(c10::IValue v) {
    TV t;
    t.kind = Kind::Const;
    t.c = std::move(v);
    return t;
  }
  static TV tensor(std::string n, DType d = DType::Undefined) {
    TV t;
    t.kind = Kind::Tensor;
    t.name = std::move(n);
    t.dtype = d;
    return t;
  }
  static TV list(std::vector<TV> items) {
    TV t;
    t.kind = Kind::List;
    t.items = std::move(items);
    return t;
  }
  bool is_const() const { return kind == Kind::Const; }
  bool is_none() const { return kind == Kind::Const && c.isNone(); }
};

// Raised for an op without a converter (or an argument form a converter does not handle).
class UnsupportedError : public Error {
 public:
  explicit UnsupportedError(std::string m) : Error(std::move(m)) {}
};

class Ctx;
using Converter = std::function<void(Ctx&, const TNode*)>;

class Ctx {
 public:
  Ctx(Builder& b, const Profile& p) : b(b), prof_(p) {}
  Builder& b;

  // Value map.
  bool has(const TValue* v) const { return vals_.count(v) != 0; }
  const TV& get(const TValue* v) const;
  const std::unordered_map<const TValue*, TV>& values() const { return vals_; }  // for verify's links
  TV& get_mut(const TValue* v) { return vals_.at(v); }
  void set(const TValue* v, TV tv);  // fills dtype/shape from the profile when missing
  const Observed* observed(const TValue* v) const { return prof_.get(v); }
  // Current states of dicts and objects by TV::ref, and the next identity to give.
  std::unordered_map<int64_t, TV> shared;
  int64_t next_ref = 1;
  // The current state of v when it is a dict or object (TV::ref), else v.
  TV current_state(const TV& v) const {
    if (v.ref) {
      auto it = shared.find(v.ref);
      if (it != shared.end()) return it->second;
    }
    return v;
  }

  // Argument access (index into node inputs).
  const TV& in(const TNode* n, size_t i) const { return get(n->input(i)); }
  bool is_const(const TNode* n, size_t i) const { return in(n, i).is_const(); }
  bool is_none(const TNode* n, size_t i) const { return i >= n->inputs().size() || in(n, i).is_none(); }
  const c10::IValue& cval(const TNode* n, size_t i) const;  // throws when not constant
  int64_t i(const TNode* n, size_t i) const { return cval(n, i).toInt(); }
  double f(const TNode* n, size_t i) const { return cval(n, i).toScalar().toDouble(); }
  bool flag(const TNode* n, size_t i) const { return cval(n, i).toBool(); }
  std::vector<int64_t> ints(const TNode* n, size_t i) const;
  std::string str(const TNode* n, size_t i) const { return cval(n, i).toStringRef(); }

  // Arguments by schema name, so files saved by PyTorch versions with extra or reordered
  // arguments convert: the input index of `name`, or nullopt when the node's schema lacks it.
  static std::optional<size_t> arg_index(const TNode* n, const std::string& name);
  // The argument `name`, or nullptr when the schema has no such argument (or the node no schema).
  const TV* arg(const TNode* n, const std::string& name) const;
  // Constant int / float / bool / int list argument by name; `dflt` when absent or None.
  int64_t i(const TNode* n, const std::string& name, int64_t dflt) const;
  double f(const TNode* n, const std::string& name, double dflt) const;
  bool flag(const TNode* n, const std::string& name, bool dflt) const;

  // Tensor names, materializing constants. `t_as` also casts to the wanted element type.
  std::string t(const TNode* n, size_t i) { return tensor(in(n, i)); }
  std::string t_as(const TNode* n, size_t i, DType d) { return tensor_as(in(n, i), d); }
  std::string tensor(const TV& v);
  std::string tensor_as(const TV& v, DType d);
  // A 1-D int64 tensor from an int list (constant, or with computed elements).
  std::string ints_tensor(const TV& list);
  // 0-d int64 tensor for an int argument (constant or computed).
  std::string int_tensor(const TV& v);

  DType dtype(const TNode* n, size_t i) const { return dtype_of(in(n, i)); }
  DType dtype_of(const TV& v) const;
  int rank(const TNode* n, size_t i) const;
  std::vector<int64_t> shape(const TNode* n, size_t i) const { return in(n, i).shape; }
  DType out_dtype(const TNode* n, size_t k = 0) const;
  int out_rank(const TNode* n, size_t k = 0) const;
  std::vector<int64_t> out_shape(const TNode* n, size_t k = 0) const;

  // Results.
  void out(const TNode* n, size_t k, const std::string& name) { set(n->output(k), TV::tensor(name)); }
  void out(const TNode* n, const std::string& name) { out(n, 0, name); }

  // Converts the nodes of a block in order (used for the graph and for If/Loop bodies).
  void convert_block(torch::jit::Block* block);
  // Unsupported ops met so far: "aten::foo" -> source lines.
  std::map<std::string, std::vector<std::string>> unsupported;
  std::vector<std::string> opset_errors;
  std::function<void(const std::string&)> warn;
  // Training-mode export (ConvertOptions::training): batch norm with batch statistics, dropout kept.
  bool training = false;
  // Set while a layout op runs on complex tensors' (real, imaginary) pair tensors: out_dtype
  // reports the real element type (ops/spectral.cpp).
  bool complex_pairs = false;
  // prim::If nodes whose condition was a constant, with the branch taken (0 then, 1 else).
  std::map<const TNode*, int> constant_ifs;

  static std::string source_of(const TNode* n);
  // The submodule a node came from, "layer3.1.conv2" (from the inlined call stack); "" at top level.
  static std::string module_of(const TNode* n);

 private:
  void convert_node(TNode* n);
  void convert_node_impl(TNode* n);
  void convert_dispatch(TNode* n, const std::string& kind, const std::function<void()>& poison);
  void convert_dequantized(TNode* n);
  bool on_scalars_as_vectors(TNode* n, const std::string& kind, const Converter& fn);
  void write_through(const TNode* writer, const TValue* view);
  void rederive_views(const TValue* base, const TNode* writer);
  bool read_after(const TNode* view, const TNode* writer, int depth = 0) const;
  std::unordered_map<const TValue*, std::vector<TNode*>> views_;  // views taken of each value
  bool try_fold(TNode* n);
  const Profile& prof_;
  std::unordered_map<const TValue*, TV> vals_;
};

// Registry of converters; each ops/*.cpp file adds its table through register_*().
struct OpEntry {
  Converter fn;
  int min_opset = 9;
};
const std::unordered_map<std::string, OpEntry>& op_table();

// Helpers shared by op files.
inline int64_t norm_axis(int64_t a, int rank) { return a < 0 ? a + rank : a; }
DType promote_dtypes(DType a, DType b);

}  // namespace t2o

namespace t2o {
Tensor tensor_from_torch(const at::Tensor& t);
at::Tensor tensor_to_torch(const Tensor& t);
}  // namespace t2o
