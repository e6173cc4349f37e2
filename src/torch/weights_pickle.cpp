// A small unpickler for torch.save(state_dict) files. libtorch's own (torch::pickle_load) turns
// the collections.OrderedDict that every state_dict is into None, so it cannot read them.
// Only the opcodes and globals that torch.save emits for dicts of tensors are understood.
#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <map>
#include <memory>

#include "ir/error.h"
#include "torch/weights.h"

namespace t2o {

c10::ScalarType storage_dtype(const std::string& g) {
  static const std::map<std::string, c10::ScalarType> m{
      {"torch.FloatStorage", c10::kFloat}, {"torch.DoubleStorage", c10::kDouble}, {"torch.HalfStorage", c10::kHalf},
      {"torch.BFloat16Storage", c10::kBFloat16}, {"torch.LongStorage", c10::kLong}, {"torch.IntStorage", c10::kInt},
      {"torch.ShortStorage", c10::kShort}, {"torch.CharStorage", c10::kChar}, {"torch.ByteStorage", c10::kByte},
      {"torch.BoolStorage", c10::kBool}, {"torch.QInt8Storage", c10::kQInt8}, {"torch.QUInt8Storage", c10::kQUInt8},
      {"torch.QInt32Storage", c10::kQInt32},
      {"torch.ComplexFloatStorage", c10::kComplexFloat}, {"torch.ComplexDoubleStorage", c10::kComplexDouble}};
  auto it = m.find(g);
  if (it == m.end()) throw InputError("unsupported storage type " + g);
  return it->second;
}

namespace {

struct PVal;
using PPtr = std::shared_ptr<PVal>;
struct PVal {
  enum class K { None, Int, Float, Bool, Str, Tuple, List, Dict, Global, Tensor, Object } k = K::None;
  int64_t i = 0;
  double f = 0;
  std::string s;  // Str, Global and Object: the text / the class name
  std::vector<PPtr> items;
  std::vector<std::pair<PPtr, PPtr>> dict;
  at::Tensor t;
};

PPtr make(PVal::K k) {
  auto p = std::make_shared<PVal>();
  p->k = k;
  return p;
}

class Unpickler {
 public:
  Unpickler(caffe2::serialize::PyTorchStreamReader& r, const char* p, size_t n) : r_(r), p_(p), n_(n) {}

  PPtr run() {
    while (true) {
      unsigned char op = static_cast<unsigned char>(byte());
      switch (op) {
        case 0x80: skip(1); break;  // PROTO
        case 0x95: skip(8); break;  // FRAME
        case 'c': {
          std::string mod = line();
          push_global(mod + "." + line());
          break;
        }
        case 0x93: {
          PPtr name = pop(), mod = pop();
          push_global(mod->s + "." + name->s);
          break;
        }
        case 'q': memo_[uint(1)] = top(); break;
        case 'r': memo_[uint(4)] = top(); break;
        case 0x94: memo_[static_cast<uint32_t>(memo_.size())] = top(); break;
        case 'h': push(memo_.at(uint(1))); break;
        case 'j': push(memo_.at(uint(4))); break;
        case '}': push(make(PVal::K::Dict)); break;
        case ']': push(make(PVal::K::List)); break;
        case ')': push(make(PVal::K::Tuple)); break;
        case '(': marks_.push_back(stack_.size()); break;
        case 't': case 'l': {
          auto v = make(op == 't' ? PVal::K::Tuple : PVal::K::List);
          v->items = pop_mark();
          push(v);
          break;
        }
        case 0x85: case 0x86: case 0x87: {
          auto v = make(PVal::K::Tuple);
          size_t k = op - 0x84;
          v->items.assign(stack_.end() - static_cast<long>(k), stack_.end());
          stack_.resize(stack_.size() - k);
          push(v);
          break;
        }
        case 'd': case 'u': {
          auto items = pop_mark();
          PPtr d = op == 'd' ? make(PVal::K::Dict) : top();
          for (size_t k = 0; k + 1 < items.size(); k += 2) d->dict.emplace_back(items[k], items[k + 1]);
          if (op == 'd') push(d);
          break;
        }
        case 's': {
          PPtr v = pop(), k = pop();
          top()->dict.emplace_back(k, v);
          break;
        }
        case 'a': {
          PPtr v = pop();
          top()->items.push_back(v);
          break;
        }
        case 'e': {
          auto items = pop_mark();
          auto& l = top()->items;
          l.insert(l.end(), items.begin(), items.end());
          break;
        }
        case 'X': case 'B': push_str(uint(4)); break;
        case 0x8c: case 'C': push_str(uint(1)); break;
        case 'J': push_int(static_cast<int32_t>(uint(4))); break;
        case 'K': push_int(uint(1)); break;
        case 'M': push_int(uint(2)); break;
        case 0x8a: {  // LONG1: little-endian two's complement
          size_t k = uint(1);
          need(k);
          int64_t v = 0;
          for (size_t b = 0; b < k && b < 8; ++b) v |= static_cast<int64_t>(static_cast<unsigned char>(p_[i_ + b])) << (8 * b);
          if (k > 0 && k < 8 && (p_[i_ + k - 1] & 0x80)) v -= int64_t{1} << (8 * k);
          i_ += k;
          push_int(v);
          break;
        }
        case 'G': {
          need(8);
          uint64_t bits = 0;
          for (int b = 0; b < 8; ++b) bits = (bits << 8) | static_cast<unsigned char>(p_[i_ + b]);
          i_ += 8;
          auto v = make(PVal::K::Float);
          std::memcpy(&v->f, &bits, 8);
          push(v);
          break;
        }
        case 0x88: case 0x89: {
          auto v = make(PVal::K::Bool);
          v->i = op == 0x88;
          push(v);
          break;
        }
        case 'N': push(make(PVal::K::None)); break;
        case 'Q': push(storage(pop())); break;
        case 'R': {
          PPtr args = pop(), f = pop();
          push(reduce(f, args));
          break;
        }
        case 0x81: {  // NEWOBJ
          PPtr args = pop(), cls = pop();
          auto v = make(PVal::K::Object);
          v->s = cls->s;
          push(v);
          break;
        }
        case 'b': pop(); break;  // BUILD: object state (an OrderedDict's _metadata) is not needed
        case '0': pop(); break;
        case '1': pop_mark(); break;
        case '2': push(top()); break;
        case '.': return pop();
        default:
          throw InputError("unsupported pickle opcode 0x" + fmt_hex(op) + " in the state_dict's data.pkl");
      }
    }
  }

 private:
  static std::string fmt_hex(unsigned v) {
    const char* d = "0123456789abcdef";
    return {d[(v >> 4) & 15], d[v & 15]};
  }
  void need(size_t k) {
    if (i_ + k > n_) throw InputError("data.pkl is truncated");
  }
  char byte() {
    need(1);
    return p_[i_++];
  }
  void skip(size_t k) {
    need(k);
    i_ += k;
  }
  uint32_t uint(size_t k) {
    need(k);
    uint32_t v = 0;
    for (size_t b = 0; b < k; ++b) v |= static_cast<uint32_t>(static_cast<unsigned char>(p_[i_ + b])) << (8 * b);
    i_ += k;
    return v;
  }
  std::string line() {
    size_t e = i_;
    while (e < n_ && p_[e] != '\n') ++e;
    std::string s(p_ + i_, e - i_);
    i_ = e + 1;
    return s;
  }
  void push(PPtr v) { stack_.push_back(std::move(v)); }
  PPtr pop() {
    if (stack_.empty()) throw InputError("malformed data.pkl (stack underflow)");
    PPtr v = stack_.back();
    stack_.pop_back();
    return v;
  }
  PPtr top() {
    if (stack_.empty()) throw InputError("malformed data.pkl (empty stack)");
    return stack_.back();
  }
  std::vector<PPtr> pop_mark() {
    if (marks_.empty()) throw InputError("malformed data.pkl (no mark)");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PPtr> items(stack_.begin() + static_cast<long>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  void push_global(std::string g) {
    auto v = make(PVal::K::Global);
    v->s = std::move(g);
    push(v);
  }
  void push_str(size_t len) {
    need(len);
    auto v = make(PVal::K::Str);
    v->s.assign(p_ + i_, len);
    i_ += len;
    push(v);
  }
  void push_int(int64_t x) {
    auto v = make(PVal::K::Int);
    v->i = x;
    push(v);
  }
  // ('storage', StorageType, key, location, numel): the bytes are the record data/<key>.
  PPtr storage(const PPtr& pid) {
    if (pid->k != PVal::K::Tuple || pid->items.size() < 5) throw InputError("unexpected persistent id in data.pkl");
    const std::string& key = pid->items[2]->s;
    auto v = make(PVal::K::Tensor);
    auto it = storages_.find(key);
    if (it != storages_.end()) {
      v->t = it->second;
      return v;
    }
    c10::ScalarType dt = storage_dtype(pid->items[1]->s);
    auto [data, size] = r_.getRecord("data/" + key);
    size_t es = c10::elementSize(dt);
    // The record must hold whole elements, as many as the persistent id declares.
    int64_t declared = pid->items[4]->k == PVal::K::Int ? pid->items[4]->i : -1;
    if (size % es != 0 || (declared >= 0 && static_cast<size_t>(declared) != size / es))
      throw InputError("storage '" + key + "' in the state_dict has " + std::to_string(size) + " bytes, not " +
                           std::to_string(declared) + " elements of " + std::to_string(es) + " bytes",
                       "the file is truncated or corrupt; save it again");
    at::Tensor t = at::empty({static_cast<int64_t>(size / es)}, at::TensorOptions().dtype(dt));
    if (size) std::memcpy(t.data_ptr(), data.get(), size);
    storages_[key] = t;
    v->t = t;
    return v;
  }
  PPtr reduce(const PPtr& f, const PPtr& args) {
    const std::string g = f->k == PVal::K::Global ? f->s : "";
    auto ints = [](const PPtr& t) {
      std::vector<int64_t> r;
      for (const auto& e : t->items) r.push_back(e->i);
      return r;
    };
    if (g == "torch._utils._rebuild_tensor_v2" || g == "torch._utils._rebuild_tensor") {
      const auto& a = args->items;
      if (a.size() < 4 || a[0]->k != PVal::K::Tensor || !a[0]->t.defined())
        throw InputError("a tensor in the state_dict is malformed (no storage)");
      auto sizes = ints(a[2]), strides = ints(a[3]);
      if (sizes.size() != strides.size()) throw InputError("a tensor in the state_dict has sizes and strides of different lengths");
      for (size_t k = 0; k < sizes.size(); ++k)
        if (sizes[k] < 0 || strides[k] < 0) throw InputError("a tensor in the state_dict has a negative size or stride");
      if (a[1]->i < 0) throw InputError("a tensor in the state_dict has a negative storage offset");
      // Bounds are ours to check: a view past the storage would read past the record.
      at::Tensor base = a[0]->t;
      int64_t end = a[1]->i, step;
      bool empty = false, overflow = false;
      for (size_t k = 0; k < sizes.size(); ++k) {
        empty |= sizes[k] == 0;
        overflow |= __builtin_mul_overflow(sizes[k] ? sizes[k] - 1 : 0, strides[k], &step) ||
                    __builtin_add_overflow(end, step, &end);
      }
      if (!empty && (overflow || end >= base.numel()))
        throw InputError("a tensor of shape " + c10::str(sizes) + " in the state_dict reaches past its storage of " +
                             std::to_string(base.numel()) + " elements",
                         "the file is truncated or corrupt; save it again");
      auto v = make(PVal::K::Tensor);
      v->t = base.as_strided(sizes, strides, a[1]->i);
      return v;
    }
    if (g == "torch._utils._rebuild_parameter") return args->items.at(0);
    if (g == "collections.OrderedDict") return make(PVal::K::Dict);
    auto v = make(PVal::K::Object);
    v->s = g;
    return v;
  }

  caffe2::serialize::PyTorchStreamReader& r_;
  const char* p_;
  size_t n_;
  size_t i_ = 0;
  std::vector<PPtr> stack_;
  std::vector<size_t> marks_;
  std::map<uint32_t, PPtr> memo_;
  std::map<std::string, at::Tensor> storages_;
};

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> unpickle_state_dict(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader r(path);
  auto [data, size] = r.getRecord("data.pkl");
  Unpickler u(r, static_cast<const char*>(data.get()), size);
  PPtr v = u.run();
  if (v->k != PVal::K::Dict) throw InputError("'" + path + "' does not hold a dict, so it is not a state_dict");
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [k, val] : v->dict) {
    if (k->k != PVal::K::Str || val->k != PVal::K::Tensor)
      throw InputError("'" + path + "' is a dict but not a state_dict: entry " +
                           (k->k == PVal::K::Str ? "'" + k->s + "'" : std::string("with a non-string key")) +
                           " is not a named tensor",
                       "a training checkpoint? save just the weights: torch.save(model.state_dict(), path)");
    out.emplace_back(k->s, val->t);
  }
  return out;
}

}  // namespace t2o
