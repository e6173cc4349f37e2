// TorchScript dicts (the Dict[str, Tensor] results of torchvision's segmentation and detection models,
// IntermediateLayerGetter's feature maps): held element-wise at conversion time with constant keys,
// in insertion order as Python keeps them, so model outputs that are dicts flatten into their values.
// ONNX has no dict type (its Map is for traditional ML), so a dict must be known key by key.
// Instances of TorchScript classes that the model creates (prim::CreateObject: torchvision's
// ImageList, the RoI pooler's LevelMapper) are held the same way, attribute name -> value.
#include <cstring>

#include "torch/ops/ops.h"

namespace t2o {
namespace {

bool is_dict_type(const TValue* v) { return v->type()->kind() == c10::TypeKind::DictType; }

// A dict given its own identity (TV::ref), registered as its current state.
TV registered(Ctx& c, TV d) {
  d.ref = c.next_ref++;
  d.alias = nullptr;
  c.shared[d.ref] = d;
  return d;
}

TV new_dict(Ctx& c, std::vector<c10::IValue> keys, std::vector<TV> items) {
  TV d = TV::list(std::move(items));
  d.dict = true;
  d.keys = std::move(keys);
  d.name = c.b.graph().name;
  return registered(c, d);
}

// The dict argument i: built in the graph, or a constant of the module.
TV dict_arg(Ctx& c, const TNode* n, size_t i) {
  const TV& v = c.in(n, i);
  if (v.dict) return c.current_state(v);
  if (v.is_const() && v.c.isGenericDict()) {
    std::vector<c10::IValue> keys;
    std::vector<TV> items;
    for (const auto& e : v.c.toGenericDict()) {
      keys.push_back(e.key());
      items.push_back(TV::constant(e.value()));
    }
    return new_dict(c, keys, items);
  }
  throw UnsupportedError(std::string(n->kind().toQualString()) + " on a dict that is not known key by key");
}

const c10::IValue& key_arg(Ctx& c, const TNode* n, size_t i) {
  const TV& k = c.in(n, i);
  if (!k.is_const()) throw UnsupportedError(std::string(n->kind().toQualString()) + " with a computed dict key");
  return k.c;
}

[[noreturn]] void key_error(const c10::IValue& k) {
  throw Error("KeyError: " + (k.isString() ? k.toStringRef() : k.isInt() ? std::to_string(k.toInt()) : k.tagKind()) +
              " is not in the dict");
}

std::optional<size_t> find_key(const std::vector<c10::IValue>& keys, const c10::IValue& key) {
  for (size_t k = 0; k < keys.size(); ++k)
    if (keys[k] == key) return k;
  return std::nullopt;
}
std::optional<size_t> find_key(const TV& d, const c10::IValue& key) { return find_key(d.keys, key); }

// Dicts change in place; the change is a plain update of the value map only in the ONNX graph the dict
// was built in. A change from inside a converted If or Loop body would leak into the other branch.
TV& mutable_dict(Ctx& c, const TNode* n) {
  TV d = dict_arg(c, n, 0);
  if (d.name != c.b.graph().name)
    throw UnsupportedError(std::string(n->kind().toQualString()) + " changes a dict or object inside control flow");
  TV& slot = c.get_mut(n->input(0));
  slot = d;
  return slot;
}

// aten::dict() / aten::dict(Dict) / aten::dict((k, v)[])
void dict_new(Ctx& c, const TNode* n) {
  if (n->inputs().empty()) return c.set(n->output(), new_dict(c, {}, {}));
  if (is_dict_type(n->input(0))) {
    TV d = dict_arg(c, n, 0);
    d.name = c.b.graph().name;
    return c.set(n->output(), registered(c, d));  // a new dict
  }
  const TV& pairs = c.in(n, 0);
  if (pairs.kind != TV::Kind::List) throw UnsupportedError("aten::dict from a list that is not known element-wise");
  std::vector<c10::IValue> keys;
  std::vector<TV> items;
  for (const TV& p : pairs.items) {
    if (p.kind != TV::Kind::List || p.items.size() != 2 || !p.items[0].is_const())
      throw UnsupportedError("aten::dict from pairs with computed keys");
    keys.push_back(p.items[0].c);
    items.push_back(p.items[1]);
  }
  c.set(n->output(), new_dict(c, keys, items));
}

void dict_construct(Ctx& c, const TNode* n) {
  std::vector<c10::IValue> keys;
  std::vector<TV> items;
  for (size_t i = 0; i + 1 < n->inputs().size(); i += 2) {
    const c10::IValue& k = key_arg(c, n, i);
    TV v = c.in(n, i + 1);
    if (auto at = find_key(keys, k)) {
      items[*at] = v;
    } else {
      keys.push_back(k);
      items.push_back(v);
    }
  }
  c.set(n->output(), new_dict(c, keys, items));
}

// d[k] = v: replaced in place, or appended (insertion order).
void put(TV& d, const c10::IValue& k, TV v) {
  if (auto at = find_key(d, k)) {
    d.items[*at] = std::move(v);
  } else {
    d.keys.push_back(k);
    d.items.push_back(std::move(v));
  }
}

void dict_set(Ctx& c, const TNode* n, size_t key_i, size_t val_i) {
  const c10::IValue& k = key_arg(c, n, key_i);
  TV v = c.in(n, val_i);
  put(mutable_dict(c, n), k, std::move(v));
}

// aten::_set_item: dict[key] = value, or list[i] = value on a list known element-wise.
void set_item(Ctx& c, const TNode* n) {
  if (is_dict_type(n->input(0))) return dict_set(c, n, 1, 2);
  TV& l = c.get_mut(n->input(0));
  if (l.sequence || (l.kind == TV::Kind::List && !c.is_const(n, 1))) {
    // A list held as an ONNX sequence, or a computed position: replace the element in the sequence.
    c.b.require(11, "setting a list element at a computed position (sequences)");
    const TV& v = c.in(n, 2);
    DType t = l.sequence ? l.dtype : c.dtype_of(v);
    TV seq = l.sequence ? l : to_sequence(c, l, t);
    std::string pos = c.int_tensor(c.in(n, 1));
    if (c.in(n, 1).rank_known && !c.in(n, 1).shape.empty()) pos = c.b.reshape(pos, {});
    // A negative position counts from the end, as for the inserted element afterwards.
    std::string len = c.b.op1("SequenceLength", {seq.name});
    pos = c.b.op1("Add", {pos, c.b.op1("Mul", {c.b.cast(c.b.op1("Less", {pos, c.b.i64(0)}), DType::Int64), len})});
    seq.name = c.b.op1("SequenceInsert", {c.b.op1("SequenceErase", {seq.name, pos}), c.tensor_as(v, t), pos});
    l = seq;
    return c.set(n->output(), c.get(n->input(0)));
  }
  if (l.kind != TV::Kind::List) throw UnsupportedError("aten::_set_item on a list that is not known element-wise");
  int64_t i = c.i(n, 1);
  int64_t len = static_cast<int64_t>(l.items.size());
  if (i < 0) i += len;
  if (i < 0 || i >= len) throw Error("list index " + std::to_string(c.i(n, 1)) + " out of range");
  l.items[static_cast<size_t>(i)] = c.in(n, 2);
  c.set(n->output(), c.get(n->input(0)));
}

void update(Ctx& c, const TNode* n) {
  TV add = dict_arg(c, n, 1);
  TV& d = mutable_dict(c, n);
  for (size_t k = 0; k < add.keys.size(); ++k) put(d, add.keys[k], add.items[k]);
}

TV lookup(Ctx& c, const TNode* n) {
  TV d = dict_arg(c, n, 0);
  const c10::IValue& k = key_arg(c, n, 1);
  auto at = find_key(d, k);
  if (!at) key_error(k);
  return d.items[*at];
}

// aten::get(dict, key[, default])
void get(Ctx& c, const TNode* n) {
  TV d = dict_arg(c, n, 0);
  auto at = find_key(d, key_arg(c, n, 1));
  if (at) return c.set(n->output(), d.items[*at]);
  c.set(n->output(), n->inputs().size() > 2 ? c.in(n, 2) : TV::constant(c10::IValue()));
}

void keys(Ctx& c, const TNode* n) {
  TV d = dict_arg(c, n, 0);
  std::vector<TV> ks;
  for (const auto& k : d.keys) ks.push_back(TV::constant(k));
  c.set(n->output(), TV::list(ks));
}

void values(Ctx& c, const TNode* n) { c.set(n->output(), TV::list(dict_arg(c, n, 0).items)); }

void items(Ctx& c, const TNode* n) {
  TV d = dict_arg(c, n, 0);
  std::vector<TV> ps;
  for (size_t k = 0; k < d.keys.size(); ++k) ps.push_back(TV::list({TV::constant(d.keys[k]), d.items[k]}));
  c.set(n->output(), TV::list(ps));
}

void erase(TV& d, size_t at) {
  d.keys.erase(d.keys.begin() + static_cast<std::ptrdiff_t>(at));
  d.items.erase(d.items.begin() + static_cast<std::ptrdiff_t>(at));
}

// aten::pop(dict, key[, default]): the value, removed; the default when the key is absent.
void pop(Ctx& c, const TNode* n) {
  const c10::IValue& k = key_arg(c, n, 1);
  TV& d = mutable_dict(c, n);
  auto at = find_key(d, k);
  if (!at) {
    if (n->inputs().size() < 3) key_error(k);
    return c.set(n->output(), c.in(n, 2));
  }
  TV v = d.items[*at];
  erase(d, *at);
  c.set(n->output(), v);
}

// del dict[key]
void delete_key(Ctx& c, const TNode* n) {
  const c10::IValue& k = key_arg(c, n, 1);
  TV& d = mutable_dict(c, n);
  auto at = find_key(d, k);
  if (!at) key_error(k);
  erase(d, *at);
}

// TorchScript's popitem takes the first inserted (key, value), where Python takes the last: the
// file's semantics are what is converted.
void popitem(Ctx& c, const TNode* n) {
  TV& d = mutable_dict(c, n);
  if (d.keys.empty()) throw Error("KeyError: popitem(): dictionary is empty");
  TV pair = TV::list({TV::constant(d.keys.front()), d.items.front()});
  erase(d, 0);
  c.set(n->output(), pair);
}

void setdefault(Ctx& c, const TNode* n) {
  const c10::IValue& k = key_arg(c, n, 1);
  TV v = c.in(n, 2);
  TV& d = mutable_dict(c, n);
  if (auto at = find_key(d, k)) return c.set(n->output(), d.items[*at]);
  d.keys.push_back(k);
  d.items.push_back(v);
  c.set(n->output(), v);
}

void clear(Ctx& c, const TNode* n) {
  TV& d = mutable_dict(c, n);
  d.keys.clear();
  d.items.clear();
}

// prim::CreateObject: an object with no attributes set yet (its __init__ follows, inlined).
void create_object(Ctx& c, const TNode* n) { c.set(n->output(), new_dict(c, {}, {})); }

// prim::SetAttr[name](object, value) on an object the model created.
void set_attr(Ctx& c, const TNode* n) {
  if (!c.in(n, 0).dict) throw UnsupportedError("prim::SetAttr on an object that is not created in forward()");
  TV v = c.in(n, 1);
  put(mutable_dict(c, n), c10::IValue(n->s(c10::attr::name)), std::move(v));
}

// prim::GetAttr[name](object) on an object the model created.
void get_attr(Ctx& c, const TNode* n) {
  if (!c.in(n, 0).dict) throw UnsupportedError("prim::GetAttr on an object that is not created in forward()");
  const TV d = dict_arg(c, n, 0);  // its current state
  const std::string name = n->s(c10::attr::name);
  auto at = find_key(d, c10::IValue(name));
  if (!at) throw Error("attribute '" + name + "' of a " + n->input(0)->type()->annotation_str() + " is read before it is set");
  c.set(n->output(), d.items[*at]);
}

// prim::Enter / prim::Exit: a `with` block in scripted code. Inside torch.no_grad(),
// torch.enable_grad(), torch.set_grad_enabled(...) or torch.inference_mode() the ops compute the
// same values (only autograd differs), so entering and leaving them converts to nothing. Other
// context managers run code of their own and are reported.
void grad_mode_context(Ctx& c, const TNode* n) {
  auto cls = n->input(0)->type()->cast<c10::ClassType>();
  const std::string name = cls && cls->name() ? cls->name()->qualifiedName() : n->input(0)->type()->annotation_str();
  static const char* const known[] = {"torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.enable_grad",
                                      "torch.autograd.grad_mode.set_grad_enabled",
                                      "torch.autograd.grad_mode.inference_mode"};
  bool ok = false;
  for (const char* k : known)
    ok = ok || (name.size() >= std::strlen(k) && name.compare(name.size() - std::strlen(k), std::string::npos, k) == 0);
  if (!ok) throw UnsupportedError("a `with` block over a " + name + " (only autograd's grad-mode context managers convert)");
  for (const TValue* v : n->outputs()) c.set(v, TV::constant(c10::IValue()));
}

// Ops that share a name with list and tensor ops: the dict form here, the others from the entry
// registered before.
Converter or_else(const Converter& for_dicts, const OpTable& t, const std::string& op) {
  auto it = t.find(op);
  Converter other = it == t.end() ? Converter() : it->second.fn;
  return [for_dicts, other, op](Ctx& c, const TNode* n) {
    if (!n->inputs().empty() && (is_dict_type(n->input(0)) || c.in(n, 0).dict)) return for_dicts(c, n);
    if (!other) throw UnsupportedError(op + " on a value that is not a dict");
    other(c, n);
  };
}

// After a change, the dict's new state is its shared one (TV::ref): a list holding it, or another
// value of it, sees the change (`result[i]["boxes"] = b`), as in TorchScript.
Converter writing_through(Converter fn) {
  return [fn](Ctx& c, const TNode* n) {
    fn(c, n);
    const TV& d = c.get(n->input(0));
    if (d.dict && d.ref) c.shared[d.ref] = d;
  };
}

}  // namespace

void register_dict_ops(OpTable& t) {
  t["aten::dict"] = {dict_new};
  t["prim::CreateObject"] = {create_object};
  t["prim::Enter"] = {grad_mode_context};
  t["prim::Exit"] = {grad_mode_context};
  t["prim::SetAttr"] = {writing_through(set_attr)};
  t["prim::GetAttr"] = {get_attr};
  t["prim::DictConstruct"] = {dict_construct};
  t["aten::_set_item"] = {writing_through(set_item)};
  t["aten::update"] = {writing_through(update)};
  t["aten::get"] = {get};
  t["aten::keys"] = {keys};
  t["aten::values"] = {values};
  t["aten::items"] = {items};
  t["aten::popitem"] = {writing_through(popitem)};
  t["aten::setdefault"] = {writing_through(setdefault)};
  t["aten::Delete"] = {writing_through(or_else(delete_key, t, "aten::Delete"))};
  t["aten::pop"] = {writing_through(or_else(pop, t, "aten::pop"))};
  t["aten::clear"] = {writing_through(or_else(clear, t, "aten::clear"))};
  t["aten::copy"] = {or_else([](Ctx& c, const TNode* n) {  // a new dict, changed apart from the old one
    TV d = dict_arg(c, n, 0);
    d.name = c.b.graph().name;
    c.set(n->output(), registered(c, d));
  }, t, "aten::copy")};
  t["aten::__getitem__"] = {or_else([](Ctx& c, const TNode* n) { c.set(n->output(), lookup(c, n)); }, t,
                                    "aten::__getitem__")};
  t["aten::__contains__"] = {or_else([](Ctx& c, const TNode* n) {
    c.set(n->output(), TV::constant(find_key(dict_arg(c, n, 0), key_arg(c, n, 1)).has_value()));
  }, t, "aten::__contains__")};
  t["aten::len"] = {or_else([](Ctx& c, const TNode* n) {
    c.set(n->output(), TV::constant(static_cast<int64_t>(dict_arg(c, n, 0).keys.size())));
  }, t, "aten::len")};
}

}  // namespace t2o
