#include "torch/custom_op.h"
#include "torch/context.h"

#include <climits>
#include <cstring>
#include <optional>
#include <set>

#include "torch/ops/complex.h"
#include "torch/ops/compose.h"
#include "torch/ops/ops.h"
#include "torch/weights.h"

namespace t2o {

Tensor tensor_from_torch(const at::Tensor& src) {
  // A view past its storage (a truncated file) would be copied from beyond the buffer.
  check_tensor_storage(src, "weight");
  at::Tensor t = src.contiguous();
  DType d = dtype_from_scalar_type(t.scalar_type());
  if (d == DType::Undefined) throw UnsupportedError("tensor of type " + std::string(c10::toString(t.scalar_type())));
  Tensor r(d, t.sizes().vec());
  if (r.nbytes()) std::memcpy(r.raw(), t.data_ptr(), r.nbytes());
  return r;
}

at::Tensor tensor_to_torch(const Tensor& t) {
  at::Tensor r = at::empty(t.dims(), at::TensorOptions().dtype(scalar_type_from_dtype(t.dtype())));
  if (t.nbytes()) std::memcpy(r.data_ptr(), t.raw(), t.nbytes());
  return r;
}

DType promote_dtypes(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Undefined) return b;
  if (b == DType::Undefined) return a;
  auto r = c10::promoteTypes(scalar_type_from_dtype(a), scalar_type_from_dtype(b));
  return dtype_from_scalar_type(r);
}

const TV& Ctx::get(const TValue* v) const {
  auto it = vals_.find(v);
  if (it == vals_.end()) throw Error("internal: value %" + v->debugName() + " used before it was converted");
  return it->second;
}

static void fill_from_observed(TV& tv, const Observed* o) {
  if (!o) return;
  if (tv.kind == TV::Kind::Tensor) {
    if (tv.dtype == DType::Undefined) tv.dtype = o->dtype;
    if (o->kind == Observed::Kind::Tensor && !tv.rank_known && o->rank_known && o->dtype != DType::Undefined) {
      tv.shape = o->sizes;
      tv.rank_known = true;
    }
    if (o->kind == Observed::Kind::Tensor && !o->rank_known) tv.rank_seen = static_cast<int>(o->sizes.size());
    if (o->kind == Observed::Kind::Int || o->kind == Observed::Kind::Float || o->kind == Observed::Kind::Bool) {
      tv.number = true;
      tv.shape.clear();
      tv.rank_known = true;
    }
  } else if (tv.kind == TV::Kind::List && (o->kind == Observed::Kind::List || o->kind == Observed::Kind::Tuple) &&
             o->elems.size() == tv.items.size()) {
    for (size_t i = 0; i < tv.items.size(); ++i) fill_from_observed(tv.items[i], &o->elems[i]);
  }
}

void Ctx::set(const TValue* v, TV tv) {
  fill_from_observed(tv, prof_.get(v));
  // Never executed while profiling (a branch the example inputs did not take): the promoted type
  // of the producing node's tensor operands, which holds for the indexing and elementwise ops such
  // branches mostly contain.
  // A number (int, float, bool) that no run computed has its TorchScript type, as profiling records it.
  if (tv.kind == TV::Kind::Tensor && tv.dtype == DType::Undefined) {
    auto k = v->type()->kind();
    if (k == c10::TypeKind::IntType || k == c10::TypeKind::FloatType || k == c10::TypeKind::BoolType) {
      tv.dtype = k == c10::TypeKind::IntType ? DType::Int64 : k == c10::TypeKind::FloatType ? DType::Float : DType::Bool;
      tv.number = true;
      tv.shape.clear();
      tv.rank_known = true;
    }
  }
  if (tv.kind == TV::Kind::Tensor && tv.dtype == DType::Undefined && v->node() && v->type()->cast<c10::TensorType>()) {
    DType t = DType::Undefined;
    for (const TValue* in : v->node()->inputs()) {
      auto it = vals_.find(in);
      if (it != vals_.end() && it->second.kind == TV::Kind::Tensor && !it->second.number)
        t = promote_dtypes(t, it->second.dtype);
    }
    tv.dtype = t;
    if (t == DType::Undefined) {  // a factory op: its dtype argument (out_dtype's rules)
      try {
        tv.dtype = out_dtype(v->node(), v->offset());
      } catch (const UnsupportedError&) {
      }
    }
  }
  vals_[v] = std::move(tv);
}

const c10::IValue& Ctx::cval(const TNode* n, size_t i) const {
  const TV& v = in(n, i);
  if (!v.is_const())
    throw UnsupportedError(std::string(n->kind().toQualString()) + " with a computed (non-constant) argument " +
                           std::to_string(i));
  return v.c;
}

std::optional<size_t> Ctx::arg_index(const TNode* n, const std::string& name) {
  const c10::FunctionSchema* schema = n->maybeSchema();
  if (!schema) return std::nullopt;
  auto k = schema->argumentIndexWithName(name);
  if (!k || static_cast<size_t>(*k) >= n->inputs().size()) return std::nullopt;
  return static_cast<size_t>(*k);
}

const TV* Ctx::arg(const TNode* n, const std::string& name) const {
  auto k = arg_index(n, name);
  return k ? &in(n, *k) : nullptr;
}

int64_t Ctx::i(const TNode* n, const std::string& name, int64_t dflt) const {
  auto k = arg_index(n, name);
  return !k || is_none(n, *k) ? dflt : i(n, *k);
}

double Ctx::f(const TNode* n, const std::string& name, double dflt) const {
  auto k = arg_index(n, name);
  return !k || is_none(n, *k) ? dflt : f(n, *k);
}

bool Ctx::flag(const TNode* n, const std::string& name, bool dflt) const {
  auto k = arg_index(n, name);
  return !k || is_none(n, *k) ? dflt : flag(n, *k);
}

std::vector<int64_t> Ctx::ints(const TNode* n, size_t i) const {
  const TV& v = in(n, i);
  if (v.kind == TV::Kind::List) {
    std::vector<int64_t> r;
    for (const TV& e : v.items) {
      if (!e.is_const()) cval(n, i);  // throws
      r.push_back(e.c.toInt());
    }
    return r;
  }
  const c10::IValue& c = cval(n, i);
  if (c.isInt()) return {c.toInt()};
  return c.toIntVector();
}

DType Ctx::dtype_of(const TV& v) const {
  if (v.kind == TV::Kind::Tensor) return v.dtype;
  if (v.kind != TV::Kind::Const) return DType::Undefined;
  if (v.c.isTensor()) return dtype_from_scalar_type(v.c.toTensor().scalar_type());
  if (v.c.isInt()) return DType::Int64;
  if (v.c.isDouble()) return DType::Float;
  if (v.c.isBool()) return DType::Bool;
  return DType::Undefined;
}

int Ctx::rank(const TNode* n, size_t i) const {
  const TV& v = in(n, i);
  if (v.is_const() && v.c.isTensor()) return static_cast<int>(v.c.toTensor().dim());
  if (v.is_const()) return 0;
  if (!v.rank_known) throw UnsupportedError(std::string(n->kind().toQualString()) + " on a value of unknown rank");
  return static_cast<int>(v.shape.size());
}

DType Ctx::out_dtype(const TNode* n, size_t k) const {
  const Observed* o = prof_.get(n->output(k));
  if (o && o->dtype != DType::Undefined) {
    if (complex_pairs && o->dtype == DType::Complex64) return DType::Float;
    if (complex_pairs && o->dtype == DType::Complex128) return DType::Double;
    return o->dtype;
  }
  // Never executed (an If branch the example inputs did not take). A number's type is its
  // TorchScript type; a tensor takes the type of the tensor operands, which holds for the
  // elementwise ops such branches mostly contain.
  switch (n->output(k)->type()->kind()) {
    case c10::TypeKind::IntType: return DType::Int64;
    case c10::TypeKind::FloatType: return DType::Float;
    case c10::TypeKind::BoolType: return DType::Bool;
    default: break;
  }
  DType t = DType::Undefined;
  for (const TValue* v : n->inputs()) {
    const TV& tv = get(v);
    if (tv.kind == TV::Kind::Tensor && !tv.number) t = promote_dtypes(t, tv.dtype);
  }
  if (t == DType::Undefined) {
    // Factory ops: their dtype argument, torch's default (float) when None.
    if (auto di = arg_index(n, "dtype")) {
      const TV& d = get(n->input(*di));
      if (d.is_const() && d.c.isInt()) t = dtype_from_scalar_type(static_cast<c10::ScalarType>(d.c.toInt()));
      else if (d.is_none() && n->output(k)->type()->kind() == c10::TypeKind::TensorType) t = DType::Float;
    }
  }
  if (t == DType::Undefined)
    throw UnsupportedError(std::string(n->kind().toQualString()) + ": output type unknown (never executed?)");
  return t;
}

int Ctx::out_rank(const TNode* n, size_t k) const { return static_cast<int>(out_shape(n, k).size()); }

std::vector<int64_t> Ctx::out_shape(const TNode* n, size_t k) const {
  const Observed* o = prof_.get(n->output(k));
  if (!o) {
    auto kind = n->output(k)->type()->kind();
    if (kind == c10::TypeKind::IntType || kind == c10::TypeKind::FloatType || kind == c10::TypeKind::BoolType)
      return {};  // a number: 0-d
  }
  if (!o || !o->rank_known)
    throw UnsupportedError(std::string(n->kind().toQualString()) + ": output shape unknown (never executed?)");
  return o->sizes;
}

std::string Ctx::tensor(const TV& v) {
  switch (v.kind) {
    case TV::Kind::Tensor:
      if (v.sequence) throw UnsupportedError("a list of tensors (ONNX sequence) used as one tensor");
      if (v.packed) throw UnsupportedError("the data of a packed sequence used other than by an RNN or pad_packed_sequence");
      return v.name;
    case TV::Kind::Const: {
      const c10::IValue& c = v.c;
      if (c.isTensor()) return b.constant(tensor_from_torch(c.toTensor()), "weight");
      if (c.isInt()) return b.i64(c.toInt());
      if (c.isDouble()) return b.scalar(c.toDouble(), DType::Float);
      if (c.isBool()) return b.scalar(c.toBool(), DType::Bool);
      if (c.isIntList()) return b.i64s(c.toIntVector());
      if (c.isDoubleList()) {
        auto d = c.toDoubleVector();
        return b.vec(d, DType::Float);
      }
      if (c.isBoolList()) {
        std::vector<double> d;
        for (bool x : c.toBoolList()) d.push_back(x);
        return b.vec(d, DType::Bool);
      }
      throw UnsupportedError("constant of type " + c.tagKind() + " used as a tensor");
    }
    case TV::Kind::List: {
      bool ints = true;
      for (const TV& e : v.items) ints = ints && (dtype_of(e) == DType::Int64) && (e.is_const() || e.number);
      if (ints) return ints_tensor(v);
      throw UnsupportedError("a list of tensors used as one tensor");
    }
    default: throw Error("internal: unset value");
  }
}

std::string Ctx::tensor_as(const TV& v, DType d) {
  if (v.is_const()) {
    const c10::IValue& c = v.c;
    if (c.isInt() || c.isDouble() || c.isBool()) return b.scalar(c.toScalar().toDouble(), d);
    if (c.isTensor()) return b.constant(tensor_from_torch(c.toTensor().to(scalar_type_from_dtype(d))), "weight");
  }
  std::string name = tensor(v);
  DType have = dtype_of(v);
  if (v.kind == TV::Kind::List) have = DType::Int64;
  return have == d ? name : b.cast(name, d);
}

std::string Ctx::int_tensor(const TV& v) {
  if (v.is_const()) return b.i64(v.c.toInt());
  return tensor_as(v, DType::Int64);
}

std::string Ctx::ints_tensor(const TV& list) {
  if (list.is_const()) {
    if (list.c.isInt()) return b.i64s({list.c.toInt()});
    return b.i64s(list.c.toIntVector());
  }
  if (list.kind == TV::Kind::Tensor) return tensor_as(list, DType::Int64);
  bool all_const = true;
  for (const TV& e : list.items) all_const = all_const && e.is_const();
  if (all_const) {
    std::vector<int64_t> v;
    for (const TV& e : list.items) v.push_back(e.c.toInt());
    return b.i64s(v);
  }
  // Runs of constants become one initializer; computed elements are unsqueezed to 1-D.
  std::vector<std::string> parts;
  std::vector<int64_t> run;
  for (const TV& e : list.items) {
    if (e.is_const()) {
      run.push_back(e.c.toInt());
      continue;
    }
    if (!run.empty()) parts.push_back(b.i64s(run)), run.clear();
    std::string x = tensor_as(e, DType::Int64);
    parts.push_back(e.rank_known && e.shape.size() == 1 ? x : b.unsqueeze(x, {0}));
  }
  if (!run.empty()) parts.push_back(b.i64s(run));
  return b.concat(parts, 0);
}

namespace {

// A loaded .pt has ranges into its serialized code (__torch__.py); the range that generated
// that code is the user's file and line.
std::optional<std::pair<std::string, size_t>> file_line(torch::jit::SourceRange range) {
  if (auto orig = range.findSourceRangeThatGenerated()) range = *orig;
  auto flc = range.file_line_col();
  // Code compiled from a string (builtins such as torch.functional's) has no file: not a place.
  if (!flc || std::get<0>(*flc).empty()) return std::nullopt;
  return std::make_pair(std::get<0>(*flc), std::get<1>(*flc));
}

// A traced model's range holds the Python stack the op was recorded under, innermost frame first,
// one "path(LINE): function" per line (torch.jit.trace's source text). Outermost first here; empty
// when the range is not such a stack.
std::vector<std::pair<std::string, size_t>> traced_stack(const torch::jit::SourceRange& range) {
  std::vector<std::pair<std::string, size_t>> frames;
  if (!range.source()) return frames;
  std::string text = range.source()->text_str().str();
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty()) continue;
    size_t colon = line.find("): ");
    size_t open = colon == std::string::npos ? std::string::npos : line.rfind('(', colon);
    if (open == std::string::npos || open == 0 || open + 1 == colon) return {};
    size_t n = 0;
    for (size_t i = open + 1; i < colon; ++i) {
      if (line[i] < '0' || line[i] > '9') return {};
      n = n * 10 + static_cast<size_t>(line[i] - '0');
    }
    frames.emplace_back(line.substr(0, open), n);
  }
  std::reverse(frames.begin(), frames.end());
  return frames;
}

// torch's own Python (nn/modules/conv.py, nn/functional.py) or its serialized copy.
bool in_torch_library(const std::string& file) {
  return file.find("-packages/torch/") != std::string::npos || file.find("__torch__/torch/") != std::string::npos;
}

}  // namespace

std::string Ctx::source_of(const TNode* n) {
  // After inlining, a node's own range is the innermost code it came from (often torch's
  // functional.py); its call stack lists the call sites from the user's forward inwards. Report
  // the innermost line that is not torch's library code, so a conv inside a user submodule
  // points at that submodule's line.
  std::vector<std::pair<std::string, size_t>> frames;  // outermost first
  if (auto cs = n->callstack())
    for (const auto& entry : (*cs)->vec())
      if (auto fl = file_line(std::get<1>(entry))) frames.push_back(*fl);
  torch::jit::SourceRange own = n->sourceRange();
  if (auto orig = own.findSourceRangeThatGenerated()) own = *orig;
  std::vector<std::pair<std::string, size_t>> stack = traced_stack(own);
  if (!stack.empty())
    frames.insert(frames.end(), stack.begin(), stack.end());
  else if (auto fl = file_line(n->sourceRange()))
    frames.push_back(*fl);
  if (frames.empty()) return {};
  auto pick = frames.front();
  for (auto it = frames.rbegin(); it != frames.rend(); ++it)
    if (!in_torch_library(it->first)) {
      pick = *it;
      break;
    }
  std::string file = pick.first;
  auto slash = file.find_last_of('/');
  if (slash != std::string::npos) file = file.substr(slash + 1);
  return file + ":" + std::to_string(pick.second);
}

std::string Ctx::module_of(const TNode* n) {
  std::string path;
  if (auto cs = n->callstack())
    for (const auto& entry : (*cs)->vec()) {
      const auto& info = std::get<2>(entry);
      // A method calling another method of its own module is recorded as instance "SELF".
      if (!info || info->instance_name().empty() || info->instance_name() == "SELF") continue;
      if (!path.empty()) path += '.';
      path += info->instance_name();
    }
  return path;
}

void Ctx::convert_block(torch::jit::Block* block) {
  for (TNode* n : block->nodes()) convert_node(n);
}

bool Ctx::try_fold(TNode* n) {
  if (!n->blocks().empty() || n->kind() == c10::prim::Constant) return false;
  for (const TValue* v : n->inputs())
    if (!get(v).is_const()) return false;
  static const std::set<c10::Symbol> foldable_prims{c10::prim::ListConstruct, c10::prim::TupleConstruct,
                                                    c10::prim::ListUnpack,    c10::prim::TupleUnpack,
                                                    c10::prim::NumToTensor,   c10::prim::TupleIndex};
  if (n->isNondeterministic() || n->hasSideEffects()) return false;
  if (n->kind().is_prim() && !foldable_prims.count(n->kind())) return false;
  if (!n->kind().is_prim() && !n->maybeSchema()) return false;
  torch::jit::Stack stack;
  bool tensor_in = false;
  for (const TValue* v : n->inputs()) {
    stack.push_back(get(v).c);
    if (get(v).c.isTensor()) tensor_in = true;
  }
  try {
    n->getOperation()(stack);
  } catch (const std::exception&) {
    return false;
  }
  if (stack.size() != n->outputs().size()) return false;
  // Creation ops would otherwise bake large filled tensors into the model; up to 64 KiB of float,
  // folding is worth it (the ops applied to the tensor fold too, instead of each becoming nodes).
  for (const c10::IValue& r : stack)
    if (r.isTensor() && !tensor_in && r.toTensor().numel() > 16384) return false;
  // Outputs keep aliasing their inputs (views), so that a later in-place op on a constant view
  // (swin's mask[a:b, c:d] = k) updates the base, as in torch.
  for (size_t k = 0; k < stack.size(); ++k) set(n->output(k), TV::constant(stack[k]));
  return true;
}

namespace {

// Ops whose output shares the input's storage in torch: a later in-place write to either is seen
// by the other.
bool is_view_op(const std::string& kind) {
  static const std::set<std::string> views{
      "aten::slice", "aten::select", "aten::narrow", "aten::view", "aten::reshape", "aten::_reshape_alias",
      "aten::flatten", "aten::unflatten", "aten::unsqueeze", "aten::squeeze", "aten::view_as", "aten::reshape_as",
      "aten::transpose", "aten::permute", "aten::t", "aten::swapaxes", "aten::expand", "aten::expand_as",
      "aten::detach", "aten::alias", "aten::split", "aten::chunk", "aten::unbind", "aten::movedim", "aten::diagonal"};
  return views.count(kind) != 0;
}

}  // namespace

void Ctx::convert_node(TNode* n) {
  convert_node_impl(n);
  if (!n->inputs().empty() && is_view_op(n->kind().toQualString()) && n->input(0)->type()->kind() == c10::TypeKind::TensorType) {
    // Once per node: an unrolled loop converts the same nodes again.
    auto& vs = views_[n->input(0)];
    if (std::find(vs.begin(), vs.end(), n) == vs.end()) vs.push_back(n);
  }
}

// After `base` got new values, every view taken of it earlier is taken again (and views of those),
// so that reads through an alias see the write, as in torch.
// Whether a value of view node `view` (or of the views taken of it) is read after `writer`: only
// such views need their values taken again (re-deriving every earlier view made chains of writes,
// x[i] = v in a loop, quadratic in nodes).
bool Ctx::read_after(const TNode* view, const TNode* writer, int depth) const {
  if (depth > 32) return true;
  for (const TValue* o : view->outputs()) {
    for (const torch::jit::Use& u : o->uses())
      if (u.user != writer && u.user->isAfter(writer)) return true;
    auto it = views_.find(o);
    if (it != views_.end())
      for (const TNode* v : it->second)
        if (v != writer && read_after(v, writer, depth + 1)) return true;
  }
  return false;
}

void Ctx::rederive_views(const TValue* base, const TNode* except) {
  auto it = views_.find(base);
  if (it == views_.end()) return;
  std::vector<TNode*> vs = it->second;
  for (TNode* vn : vs) {
    if (vn == except || vn->owningBlock() != except->owningBlock() || !read_after(vn, except)) continue;
    const std::string kind = vn->kind().toQualString();
    auto e = op_table().find(kind);
    if (e == op_table().end()) continue;
    b.set_origin(source_of(vn), kind, module_of(vn));
    e->second.fn(*this, vn);
    for (const TValue* o : vn->outputs()) rederive_views(o, except);
  }
}

void Ctx::convert_node_impl(TNode* n) {
  std::string kind = n->kind().toQualString();
  bool poisoned = false;
  for (const TValue* v : n->inputs()) poisoned = poisoned || get(v).poisoned;
  auto poison = [&] {
    for (const TValue* o : n->outputs()) {
      TV p = TV::constant(c10::IValue());
      p.poisoned = true;
      vals_[o] = p;
    }
  };
  if (poisoned) {
    // What the node writes into (a dict's _set_item, a list's append, an in-place op) is poisoned
    // too: left as it was, it would be read later as if the write had happened.
    if (const c10::FunctionSchema* schema = n->maybeSchema())
      for (size_t i = 0; i < schema->arguments().size() && i < n->inputs().size(); ++i) {
        const auto* alias = schema->arguments()[i].alias_info();
        if (alias && alias->isWrite()) vals_[n->input(i)].poisoned = true;
      }
    return poison();
  }
  if (n->kind() == c10::prim::Constant) {
    set(n->output(), TV::constant(torch::jit::toIValue(n->output()).value()));
    return;
  }
  if (try_fold(n)) return;
  // Quantized tensors reach ops that do not know them: they get the float values, and a result
  // that torch returns quantized is quantized again (ops/quantized.cpp).
  static const std::set<std::string> quantized_carriers{
      "prim::ListConstruct", "prim::TupleConstruct", "prim::ListUnpack", "prim::TupleUnpack", "prim::TupleIndex",
      "aten::__getitem__", "aten::size", "aten::dim", "aten::len", "prim::unchecked_cast", "prim::is_quantized",
      "aten::quantize_per_tensor", "aten::quantize_per_channel", "aten::dequantize", "aten::int_repr",
      "aten::q_scale", "aten::q_zero_point"};
  if (kind.rfind("quantized::", 0) != 0 && !quantized_carriers.count(kind)) {
    bool quantized_in = false;
    for (const TValue* v : n->inputs()) {
      const TV& x = get(v);
      quantized_in = quantized_in || is_quantized(x) ||
                     (x.kind == TV::Kind::List && std::any_of(x.items.begin(), x.items.end(), is_quantized));
    }
    if (quantized_in) return convert_dequantized(n);
  }
  convert_dispatch(n, kind, poison);
}

void Ctx::convert_dequantized(TNode* n) {
  std::vector<std::pair<const TValue*, TV>> saved;
  TV first;  // the first quantized input
  auto deq = [&](const TV& x) {
    if (!is_quantized(x)) return x;
    TV q = quantized_tv(*this, x);
    if (first.qscale.empty()) first = q;
    return dequantized(*this, q);
  };
  for (const TValue* v : n->inputs()) {
    TV& x = vals_.at(v);
    if (x.kind == TV::Kind::List) {
      if (!std::any_of(x.items.begin(), x.items.end(), is_quantized)) continue;
      TV repl = x;
      for (TV& it : repl.items) it = deq(it);
      saved.emplace_back(v, x);
      x = repl;
    } else if (is_quantized(x)) {
      TV repl = deq(x);
      saved.emplace_back(v, x);
      x = repl;
    }
  }
  auto poison = [&] {
    for (const TValue* o : n->outputs()) {
      TV p = TV::constant(c10::IValue());
      p.poisoned = true;
      vals_[o] = p;
    }
  };
  convert_dispatch(n, n->kind().toQualString(), poison);
  for (auto& [v, x] : saved)
    if (std::find(n->outputs().begin(), n->outputs().end(), v) == n->outputs().end()) vals_[v] = x;
  for (const TValue* o : n->outputs()) {
    const Observed* ob = prof_.get(o);
    const TV& f = get(o);
    if (!ob || f.poisoned) continue;
    try {
      if (f.kind == TV::Kind::List && ob->elems.size() == f.items.size()) {
        // chunk / split / unbind of a quantized tensor: each part keeps the input's scale and zero point.
        TV parts = f;
        for (size_t k = 0; k < parts.items.size(); ++k) {
          const Observed& e = ob->elems[k];
          TV& it = parts.items[k];
          if (!e.quantized || it.kind != TV::Kind::Tensor) continue;
          if (e.per_channel || e.qvaries)
            throw UnsupportedError("a quantized result whose scale and zero point are per channel or vary");
          it = quantize_to(*this, it, tensor(it), b.scalar(e.qscale, DType::Float), quantized_zero(*this, e.qzero, e.qdtype),
                           e.qdtype);
        }
        vals_[o] = parts;
        continue;
      }
      if (!ob->quantized || f.kind != TV::Kind::Tensor) continue;
      vals_[o] = requantized(*this, o, tensor(f), first, f);
    } catch (const UnsupportedError& e) {
      unsupported[std::string(n->kind().toQualString()) + " (" + e.what() + ")"].push_back(source_of(n));
      TV p = TV::constant(c10::IValue());
      p.poisoned = true;
      vals_[o] = p;
    }
  }
}

// Ops with a dim argument take a 0-d tensor as one element along dim 0 or -1, where ONNX's
// reductions, ArgMax, CumSum, GatherElements, Gather want rank >= 1: their 0-d tensor inputs are
// given to the converter as 1-element vectors, and its outputs take the shapes torch gave them
// (0-d, or the static shape profiled). False when the node has no 0-d tensor input (or is not such an op).
bool Ctx::on_scalars_as_vectors(TNode* n, const std::string& kind, const Converter& fn) {
  static const std::set<std::string> dim_ops{
      "aten::argmax",       "aten::argmin",      "aten::all",          "aten::any",          "aten::logsumexp",
      "aten::max",          "aten::min",         "aten::amax",         "aten::amin",         "aten::cumsum",
      "aten::cumprod",      "aten::cummax",      "aten::cummin",       "aten::logcumsumexp", "aten::gather",
      "aten::index_select", "aten::index_add",   "aten::index_copy",   "aten::index_fill",   "aten::index_reduce",
      "aten::scatter",      "aten::scatter_add", "aten::scatter_reduce", "aten::take_along_dim", "aten::unfold",
      "aten::kthvalue",     "aten::median",      "aten::nanmedian",    "aten::mode",         "aten::sort",
      "aten::argsort",      "aten::topk"};
  std::string base = kind.size() > 1 && kind.back() == '_' ? kind.substr(0, kind.size() - 1) : kind;
  if (!dim_ops.count(base)) return false;
  auto zero_d = [&](const TV& v) {
    if (v.kind == TV::Kind::Tensor) return !v.number && v.rank_known && v.shape.empty() && v.qscale.empty();
    return v.is_const() && v.c.isTensor() && v.c.toTensor().dim() == 0;
  };
  if (n->inputs().empty() || !zero_d(get(n->input(0)))) return false;
  std::vector<std::pair<const TValue*, TV>> saved;
  for (const TValue* v : n->inputs()) {
    const TV& x = get(v);
    if (!zero_d(x) || std::any_of(saved.begin(), saved.end(), [&](const auto& s) { return s.first == v; })) continue;
    TV vec = TV::tensor(b.unsqueeze(tensor(x), {0}), dtype_of(x));
    vec.shape = {1};
    vec.rank_known = true;
    saved.emplace_back(v, x);
    vals_[v] = vec;
  }
  try {
    fn(*this, n);
  } catch (...) {
    for (auto& [v, x] : saved) vals_[v] = x;
    throw;
  }
  for (auto& [v, x] : saved)
    if (std::find(n->outputs().begin(), n->outputs().end(), v) == n->outputs().end()) vals_[v] = x;
  for (const TValue* o : n->outputs()) {
    const Observed* ob = prof_.get(o);
    if (!has(o) || !ob || ob->kind != Observed::Kind::Tensor || !ob->rank_known) continue;
    const TV& f = get(o);
    if (f.kind != TV::Kind::Tensor || f.number || f.poisoned || f.sequence) continue;
    bool fixed = std::all_of(ob->sizes.begin(), ob->sizes.end(), [](int64_t d) { return d >= 0; });
    if (!fixed) continue;
    TV r = TV::tensor(b.reshape(f.name, ob->sizes), f.dtype);
    vals_[o] = r;
  }
  return true;
}

void Ctx::convert_dispatch(TNode* n, const std::string& kind, const std::function<void()>& poison) {
  const OpTable* tbl = &op_table();
  // Complex tensors (real pairs, ops/spectral.cpp) go only to the ops that know that layout, and
  // through the ones that merely carry values.
  static const std::set<std::string> carriers{"prim::ListConstruct", "prim::TupleConstruct", "prim::ListUnpack",
                                              "prim::TupleUnpack",   "prim::TupleIndex",     "aten::__getitem__",
                                              "aten::size",          "aten::dim",            "aten::len",
                                              "prim::unchecked_cast", "aten::detach",        "aten::contiguous",
                                              "aten::clone",         "prim::dtype",          "prim::device",
                                              "aten::is_floating_point", "aten::is_complex",  "prim::is_cuda",
                                              "prim::requires_grad", "prim::is_quantized",   "aten::__is__",
                                              "aten::__isnot__"};
  auto is_complex = [](const TV& x) {
    return x.kind == TV::Kind::Tensor && (x.dtype == DType::Complex64 || x.dtype == DType::Complex128);
  };
  // Complex constants (parameters, buffers, folded values) become pair tensors here, so that they
  // reach only the converters that know the layout.
  for (const TValue* v : n->inputs()) {
    const TV& x = get(v);
    if (x.is_const() && x.c.isTensor() && x.c.toTensor().is_complex()) set(v, cplx::constant_pair(*this, x.c.toTensor()));
  }
  bool complex_in = std::any_of(n->inputs().begin(), n->inputs().end(), [&](const TValue* v) {
    const TV& x = get(v);
    return is_complex(x) || (x.is_const() && x.c.isComplexDouble()) ||  // a complex number makes the result complex
           (x.kind == TV::Kind::List && std::any_of(x.items.begin(), x.items.end(), is_complex));
  });
  // Nested tensors (held padded, TV::nested) go only to the ops that know them.
  static const std::set<std::string> nested_ops{"aten::_transformer_encoder_layer_fwd", "aten::to_padded_tensor",
                                                "prim::is_nested", "prim::ListConstruct", "prim::TupleConstruct",
                                                "prim::ListUnpack", "prim::TupleUnpack", "prim::TupleIndex",
                                                "aten::__getitem__", "aten::__is__", "aten::__isnot__",
                                                "prim::unchecked_cast", "aten::detach", "aten::dim", "prim::is_cuda",
                                                "prim::device", "prim::dtype", "prim::requires_grad", "prim::is_mkldnn",
                                                "prim::is_quantized", "prim::is_nested"};
  bool nested_in = std::any_of(n->inputs().begin(), n->inputs().end(),
                               [&](const TValue* v) { return !get(v).nested.empty(); });
  if (nested_in && !nested_ops.count(kind)) {
    unsupported[kind + " on a nested tensor"].push_back(source_of(n));
    return poison();
  }
  if (complex_in && !carriers.count(kind)) {
    tbl = &complex_op_table();
    bool inplace = kind.size() > 1 && kind.back() == '_' && tbl->count(kind.substr(0, kind.size() - 1));
    if (!tbl->count(kind) && !inplace) {
      unsupported[kind + " on a complex tensor"].push_back(source_of(n));
      return poison();
    }
  }
  const auto& table = *tbl;
  auto it = table.find(kind);
  bool inplace_fallback = false;
  if (it == table.end() && kind.size() > 1 && kind.back() == '_') {
    it = table.find(kind.substr(0, kind.size() - 1));
    inplace_fallback = it != table.end();
  }
  std::string src = source_of(n);
  if (it == table.end()) {
    if (const Converter* custom = custom_op_converter(kind)) {  // --custom-op
      b.set_origin(src, kind, module_of(n));
      try {
        (*custom)(*this, n);
        return;
      } catch (const UnsupportedError& e) {
        unsupported[kind + " (" + e.what() + ")"].push_back(src);
        return poison();
      }
    }
    unsupported[kind].push_back(src);
    return poison();
  }
  b.set_origin(src, kind, module_of(n));
  try {
    if (b.opset() < it->second.min_opset) throw OpsetError(kind, it->second.min_opset);
    if (!on_scalars_as_vectors(n, kind, it->second.fn)) it->second.fn(*this, n);
  } catch (const OpsetError& e) {
    opset_errors.push_back(kind + (src.empty() ? "" : " at " + src) + ": " + e.what +
                           " needs opset >= " + std::to_string(e.min_opset));
    return poison();
  } catch (const UnsupportedError& e) {
    std::string what = e.what();
    unsupported[what.rfind(kind, 0) == 0 ? what : kind + " (" + what + ")"].push_back(src);
    return poison();
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    // After an op that could not be converted, values it would have changed in place (a list it
    // appends to) may be missing what they should hold: a failure here may be a consequence, and
    // the report of the unconverted ops is what says what to change.
    if (!unsupported.empty() || !opset_errors.empty()) return poison();
    if (const auto* err = dynamic_cast<const Error*>(&e))
      throw Error(kind + (src.empty() ? "" : " (" + src + ")") + ": " + err->what(), err->hint(), err->exit_code());
    if (const auto* err = dynamic_cast<const c10::Error*>(&e))
      throw Error(kind + (src.empty() ? "" : " (" + src + ")") + ": " + err->what_without_backtrace());
    throw Error(kind + (src.empty() ? "" : " (" + src + ")") + ": internal error: " + e.what(),
                "file a report with the model");
  }
  for (const TValue* o : n->outputs())
    if (!has(o)) throw Error("internal: converter for " + kind + " did not set all outputs");
  // In-place ops that survived mutation removal: later uses of the operand see the result, and
  // so do later uses of the tensor it is a view of (x[:, 1:3] += 1 changes x).
  if (inplace_fallback) {
    set(n->input(0), get(n->output(0)));
    if (n->input(0)->type()->kind() == c10::TypeKind::ListType) return;  // a list (res += [...]): no views
    try {
      write_through(n, n->input(0));
    } catch (const OpsetError& e) {
      opset_errors.push_back(kind + (src.empty() ? "" : " at " + src) + ": " + e.what +
                             " needs opset >= " + std::to_string(e.min_opset));
      return poison();
    } catch (const UnsupportedError& e) {
      unsupported[kind + " (" + e.what() + ")"].push_back(src);
      return poison();
    }
  }
}

namespace {

bool full_slice(const TV& start, const TV& end, const TV& step) {
  return start.is_const() && (start.c.isNone() || (start.c.isInt() && start.c.toInt() == 0)) && end.is_const() &&
         (end.c.isNone() || (end.c.isInt() && end.c.toInt() == INT64_MAX)) && step.is_const() &&
         (step.c.isNone() || (step.c.isInt() && step.c.toInt() == 1));
}

}  // namespace

// `view` has just been given a new value by an in-place op. If it is a view of another tensor
// (slice, select, narrow, reshape-like, transpose), that tensor gets the new values at the
// viewed positions, and so on up the chain of views.
void Ctx::write_through(const TNode* writer, const TValue* view) {
  const TNode* via = nullptr;  // the view node whose output the write went through
  for (const TValue* v = view;;) {
    const TNode* p = v->node();
    if (p->inputs().empty() || !has(p->input(0))) break;
    // A tensor of an enclosing block would need to leave the If/Loop body as its output.
    if (p->owningBlock() != writer->owningBlock()) break;
    const TValue* base = p->input(0);
    const TV& bv = get(base);
    if (bv.kind == TV::Kind::List || (bv.is_const() && !bv.c.isTensor())) break;
    const std::string kind = p->kind().toQualString();
    std::string nv;  // the base's new value
    auto rank_of = [&](const TV& t) -> int {
      if (t.is_const() && t.c.isTensor()) return static_cast<int>(t.c.toTensor().dim());
      return t.rank_known ? static_cast<int>(t.shape.size()) : -1;
    };
    int r = rank_of(bv);
    if (r < 0) break;
    DType bt = dtype_of(bv);
    // A complex base is written through its pair tensor, one (real, imaginary) dim more.
    bool cx = cplx::is_complex(bt);
    int pr = cx ? r + 1 : r;
    std::string upd;
    if (cx) {
      const TV& u = get(v);
      if (!cplx::is_complex(u)) break;
      upd = u.dtype == bt ? u.name : b.cast(u.name, cplx::real_of(bt));
    } else {
      upd = tensor_as(get(v), bt);
    }
    // Positions `pos` (1-D int64) of axis `axis` of the base receive `u` (the view's shape, with
    // the axis kept).
    auto scatter = [&](const std::string& pos, int64_t axis, const std::string& u) {
      b.require(11, "writing through a slice of a tensor (ScatterElements)");
      std::vector<int64_t> others;
      for (int64_t a = 0; a < pr; ++a)
        if (a != axis) others.push_back(a);
      std::string idx = others.empty() ? pos : b.unsqueeze(pos, others);
      idx = b.op1("Expand", {idx, b.shape_of(u)});
      return b.op1("ScatterElements", {tensor(bv), idx, u}, {Attribute::make_int("axis", axis)});
    };
    auto positions = [&](int64_t axis, const std::string& start, const std::string& end, const std::string& step) {
      std::string len = b.dim(tensor(bv), axis);
      std::string all = b.op1("Range", {b.i64(0), len, b.i64(1)});
      std::vector<std::string> in{all, start, end, b.i64s({0})};
      if (!step.empty()) in.push_back(step);
      return b.op1("Slice", in);
    };
    auto one = [&](const TV& t, int64_t dflt) {
      if (t.is_none()) return b.i64s({dflt});
      return b.unsqueeze(int_tensor(t), {0});
    };
    auto const_int = [&](size_t i) { return get(p->input(i)).is_const() && get(p->input(i)).c.isInt(); };
    if ((kind == "aten::slice" || kind == "aten::narrow" || kind == "aten::select") && !const_int(1)) break;
    if (kind == "aten::slice" && p->inputs().size() == 5) {
      const TV &start = get(p->input(2)), &end = get(p->input(3)), &step = get(p->input(4));
      if (full_slice(start, end, step)) {
        nv = upd;
      } else {
        int64_t axis = norm_axis(get(p->input(1)).c.toInt(), r);
        std::string st = step.is_none() || (step.is_const() && step.c.toInt() == 1) ? std::string() : one(step, 1);
        nv = scatter(positions(axis, one(start, 0), one(end, INT64_MAX), st), axis, upd);
      }
    } else if (kind == "aten::narrow") {
      int64_t axis = norm_axis(get(p->input(1)).c.toInt(), r);
      std::string st = one(get(p->input(2)), 0);
      nv = scatter(positions(axis, st, b.op1("Add", {st, one(get(p->input(3)), 0)}), {}), axis, upd);
    } else if (kind == "aten::select") {
      int64_t axis = norm_axis(get(p->input(1)).c.toInt(), r);
      std::string i = one(get(p->input(2)), 0);
      // i + 1 is 0 for the last element counted from the end: that slice runs to the end.
      std::string e = b.op1("Add", {i, b.i64s({1})});
      e = b.op1("Where", {b.op1("Equal", {e, b.i64s({0})}), b.i64s({INT64_MAX}), e});
      nv = scatter(positions(axis, i, e, {}), axis, b.unsqueeze(upd, {axis}));
    } else if (kind == "aten::view" || kind == "aten::reshape" || kind == "aten::_reshape_alias" ||
               kind == "aten::flatten" || kind == "aten::unflatten" || kind == "aten::unsqueeze" ||
               kind == "aten::squeeze" || kind == "aten::view_as" || kind == "aten::reshape_as") {
      nv = b.op1("Reshape", {upd, b.shape_of(tensor(bv))});
    } else if (kind == "aten::transpose" || kind == "aten::permute" || kind == "aten::t" ||
               kind == "aten::swapaxes" || kind == "aten::movedim") {
      std::vector<int64_t> perm(static_cast<size_t>(r));
      for (int i = 0; i < r; ++i) perm[static_cast<size_t>(i)] = i;
      if (kind == "aten::movedim") {
        // Output dim dst[k] is input dim src[k]; the others keep their order.
        const TV &sv = get(p->input(1)), &dv = get(p->input(2));
        if (!sv.is_const() || !dv.is_const())
          throw UnsupportedError(std::string(writer->kind().toQualString()) + " writing through movedim with computed dims");
        std::vector<int64_t> src = sv.c.isInt() ? std::vector<int64_t>{sv.c.toInt()} : sv.c.toIntVector();
        std::vector<int64_t> dst = dv.c.isInt() ? std::vector<int64_t>{dv.c.toInt()} : dv.c.toIntVector();
        std::vector<int64_t> m(static_cast<size_t>(r), -1);
        std::vector<bool> taken(static_cast<size_t>(r), false);
        for (size_t k = 0; k < src.size() && k < dst.size(); ++k) {
          m[static_cast<size_t>(norm_axis(dst[k], r))] = norm_axis(src[k], r);
          taken[static_cast<size_t>(norm_axis(src[k], r))] = true;
        }
        int64_t next = 0;
        for (auto& d : m) {
          if (d >= 0) continue;
          while (taken[static_cast<size_t>(next)]) ++next;
          d = next++;
        }
        perm = m;
      } else if (kind == "aten::permute") {
        perm = get(p->input(1)).is_const() ? get(p->input(1)).c.toIntVector() : std::vector<int64_t>{};
        if (perm.size() != static_cast<size_t>(r)) break;
        for (auto& a : perm) a = norm_axis(a, r);
      } else if (r >= 2) {
        if (kind != "aten::t" && !(const_int(1) && const_int(2))) break;
        int64_t a0 = kind == "aten::t" ? 0 : norm_axis(get(p->input(1)).c.toInt(), r);
        int64_t a1 = kind == "aten::t" ? 1 : norm_axis(get(p->input(2)).c.toInt(), r);
        std::swap(perm[static_cast<size_t>(a0)], perm[static_cast<size_t>(a1)]);
      }
      std::vector<int64_t> inv(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
      if (cx) inv.push_back(r);
      nv = b.transpose(upd, inv);
    } else if (kind == "aten::detach" || kind == "aten::alias" || kind == "prim::unchecked_cast") {
      nv = upd;
    } else if (kind == "aten::diagonal" && !cx && r >= 2 && const_int(1) && const_int(2) && const_int(3)) {
      // diagonal(offset, d1, d2) is base[.., k, k + offset, ..] (offset >= 0) or base[.., k - offset, k, ..],
      // its positions last. Each base element on that diagonal takes the update at its k.
      b.require(11, "writing through a diagonal (Range)");
      int64_t off = get(p->input(1)).c.toInt();
      int64_t d1 = norm_axis(get(p->input(2)).c.toInt(), r), d2 = norm_axis(get(p->input(3)).c.toInt(), r);
      int64_t kd = off >= 0 ? d1 : d2, od = off >= 0 ? d2 : d1;
      std::string base_t = tensor(bv);
      auto arange = [&](int64_t axis) { return b.op1("Range", {b.i64(0), b.dim(base_t, axis), b.i64(1)}); };
      // One padding element after the diagonal: positions past its end (all of them when it is
      // empty) read that, and are never on the diagonal.
      std::vector<int64_t> pads(2 * static_cast<size_t>(r - 1), 0);
      pads.back() = 1;
      std::string padded = b.pad(upd, pads, "constant", 0.0, bt);
      std::string last = b.dim(upd, r - 2);
      std::string k = arange(kd);
      k = b.op1("Where", {b.op1("Greater", {k, last}), last, k});
      std::string g = b.unsqueeze(b.op1("Gather", {padded, k}, {Attribute::make_int("axis", r - 2)}), {r - 1});
      std::vector<int64_t> perm;  // g's axes: the others in order, then kd, then od
      for (int64_t j = 0, o = 0; j < r; ++j) perm.push_back(j == kd ? r - 2 : j == od ? r - 1 : o++);
      g = b.transpose(g, perm);
      std::string i1 = along_axis(*this, arange(d1), d1, r), i2 = along_axis(*this, arange(d2), d2, r);
      std::string on = b.op1("Equal", {b.op1("Sub", {i2, i1}), b.i64(off)});
      nv = b.op1("Where", {on, g, base_t});
    } else {
      // A view this cannot write through: the base would keep its old values. Fine when nothing reads
      // the base afterwards; otherwise the result would be wrong, so the op is refused.
      auto sch = p->maybeSchema();
      bool aliases = sch && !sch->returns().empty() && sch->returns()[0].alias_info() &&
                     !sch->returns()[0].alias_info()->isWrite();
      if (aliases || is_view_op(kind)) {
        bool read_later = false;
        for (const auto& u : base->uses()) {
          const TNode* user = u.user;
          while (user && user->owningBlock() != writer->owningBlock()) {
            const torch::jit::Block* ob = user->owningBlock();
            user = ob ? ob->owningNode() : nullptr;
          }
          if (!user || user->kind() == c10::prim::Return || (user != writer && user != p && user->isAfter(writer)))
            read_later = true;
        }
        if (read_later)
          throw UnsupportedError(std::string(writer->kind().toQualString()) + " writing through a view made by " + kind +
                                 " of a tensor read afterwards");
      }
      break;
    }
    TV out = TV::tensor(nv, bt);
    out.shape = bv.is_const() ? bv.c.toTensor().sizes().vec() : bv.shape;
    out.rank_known = true;
    set(base, out);
    via = p;
    v = base;
    // Views of this tensor other than the one written through now read the new values.
    for (TNode* other : std::vector<TNode*>(views_[base]))
      if (other != via && read_after(other, writer)) {
        const std::string k = other->kind().toQualString();
        const OpTable& table = cx ? complex_op_table() : op_table();
        auto e = table.find(k);
        if (e == table.end() || other->owningBlock() != writer->owningBlock()) continue;
        b.set_origin(source_of(other), k, module_of(other));
        e->second.fn(*this, other);
        for (const TValue* o : other->outputs()) rederive_views(o, writer);
      }
  }
  b.set_origin(source_of(writer), writer->kind().toQualString(), module_of(writer));
}

const std::unordered_map<std::string, OpEntry>& op_table() {
  static const OpTable table = [] {
    OpTable t;
    register_prim_ops(t);
    register_control_ops(t);
    register_elementwise_ops(t);
    register_activation_ops(t);
    register_conv_ops(t);
    register_norm_ops(t);
    register_matmul_ops(t);
    register_shape_ops(t);
    register_reduce_ops(t);
    register_index_ops(t);
    register_creation_ops(t);
    register_resize_ops(t);
    register_rnn_ops(t);
    register_cell_ops(t);
    register_attention_ops(t);
    register_sampling_ops(t);
    register_loss_ops(t);
    register_stats_ops(t);
    register_order_stat_ops(t);
    register_cumulative_ops(t);
    register_layout_ops(t);
    register_window_ops(t);
    register_linalg_ops(t);
    register_index_update_ops(t);
    register_selection_ops(t);
    register_math_fn_ops(t);
    register_nn_form_ops(t);
    register_range_ops(t);
    register_dict_ops(t);
    register_detection_ops(t);
    register_deform_ops(t);
    register_assorted_ops(t);
    register_spectral_ops(t);
    register_quantized_ops(t);
    register_pitfall_ops(t);  // wraps entries registered above
    return t;
  }();
  return table;
}

}  // namespace t2o
