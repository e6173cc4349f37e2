// Checks on TorchScript archives and on the tensors libtorch builds from them. libtorch trusts its
// files: it rebuilds a tensor from a record without comparing the record's size with the tensor's
// shape and strides, and its TorchScript parser recurses once per nesting level. A truncated or
// hostile .pt would then read past a buffer or overflow the stack; these checks turn that into an
// InputError (exit 4) before libtorch or our copy touches the data.
#include <caffe2/serialize/inline_container.h>

#include <cctype>
#include <torch/csrc/jit/ir/constants.h>
#include <pthread.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <set>

#include "ir/error.h"
#include "torch/weights.h"

namespace t2o {

namespace {

// Far above what real TorchScript code nests (a few dozen), far below what overflows the parser.
constexpr int kMaxNesting = 256;

// The pickles of a TorchScript archive (data.pkl, constants.pkl): libtorch's unpickler grows its
// memo to the largest index a BINPUT / LONG_BINPUT names, so a 4-byte index of 300 million asked
// for gigabytes. A real pickle memoizes fewer objects than it has bytes; the opcodes torch writes
// are walked (an unknown one ends the walk and leaves the rest to libtorch) and a larger index is
// refused.
void check_pickle_memo(const char* p, size_t n, const std::string& record, const std::string& path) {
  size_t i = 0;
  auto need = [&](size_t k) { return i + k <= n; };
  auto le = [&](size_t at, int bytes) {
    uint64_t v = 0;
    for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | static_cast<unsigned char>(p[at + static_cast<size_t>(b)]);
    return v;
  };
  auto skip_line = [&] {
    while (i < n && p[i] != '\n') ++i;
    ++i;
  };
  while (i < n) {
    unsigned char op = static_cast<unsigned char>(p[i++]);
    switch (op) {
      case 0x80: i += 1; break;                          // PROTO
      case 0x95: i += 8; break;                          // FRAME
      case 'c': skip_line(); skip_line(); break;         // GLOBAL
      case 'q': case 'h': case 'K': i += 1; break;       // BINPUT, BINGET, BININT1
      case 'M': i += 2; break;                           // BININT2
      case 'J': i += 4; break;                           // BININT
      case 'G': i += 8; break;                           // BINFLOAT
      case 'j': i += 4; break;                           // LONG_BINGET
      case 'r': {                                        // LONG_BINPUT
        if (!need(4)) return;
        uint64_t idx = le(i, 4);
        if (idx >= n)
          throw InputError("'" + path + "' is not a valid TorchScript file: " + record + " memoizes object " +
                               std::to_string(idx) + " in " + std::to_string(n) + " bytes",
                           "the file is corrupt; save the model again");
        i += 4;
        break;
      }
      case 'X': case 'B': {                              // BINUNICODE, BINBYTES
        if (!need(4)) return;
        i += 4 + le(i, 4);
        break;
      }
      case 0x8c: case 'C': {                             // SHORT_BINUNICODE, SHORT_BINBYTES
        if (!need(1)) return;
        i += 1 + static_cast<unsigned char>(p[i]);
        break;
      }
      case 0x8a: {                                       // LONG1
        if (!need(1)) return;
        i += 1 + static_cast<unsigned char>(p[i]);
        break;
      }
      case '(': case ')': case ']': case '}': case 't': case 0x85: case 0x86: case 0x87: case 'N': case 0x88:
      case 0x89: case 'Q': case 0x81: case 'R': case 'b': case 's': case 'u': case 'a': case 'e': case 0x94:
      case 0x93: case '0': case '.':
        break;                                           // no argument
      default:
        return;                                          // not one torch writes: libtorch decides
    }
  }
}

// A module class body holds its method definitions, annotated attributes and constants
// (`training : bool`, `in_features : Final[int] = 2`) and two unannotated lists, __parameters__
// and __buffers__. libtorch's importer reads any other unannotated assignment there as a constant
// and dereferences its missing type (SIGSEGV): refused here first.
void check_module_class_bodies(const std::string& code, const std::string& record, const std::string& path) {
  bool in_module = false;
  size_t pos = 0;
  while (pos < code.size()) {
    size_t eol = code.find('\n', pos);
    if (eol == std::string::npos) eol = code.size();
    std::string line = code.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty() || line[0] == '#') continue;
    if (line[0] != ' ') {
      in_module = line.rfind("class ", 0) == 0 && line.find("(Module):") != std::string::npos;
      continue;
    }
    if (!in_module || line.size() < 3 || line[0] != ' ' || line[1] != ' ' || line[2] == ' ') continue;
    size_t k = 2;
    while (k < line.size() && (std::isalnum(static_cast<unsigned char>(line[k])) || line[k] == '_')) ++k;
    if (k == 2) continue;
    std::string name = line.substr(2, k - 2);
    size_t eq = k;
    while (eq < line.size() && line[eq] == ' ') ++eq;
    if (eq >= line.size() || line[eq] != '=' || (eq + 1 < line.size() && line[eq + 1] == '=')) continue;
    if (name == "__parameters__" || name == "__buffers__") continue;
    throw InputError("'" + path + "' is not a valid TorchScript file: " + record + " assigns '" + name +
                         "' in a module class body without a type",
                     "module classes declare attributes with a type (NAME : TYPE); save the model again");
  }
}

// The deepest bracket nesting and the longest run of prefix operators ("- - - x", "not not x")
// in TorchScript source, skipping string literals and comments.
void check_code_nesting(const std::string& code, const std::string& record, const std::string& path) {
  int depth = 0, unary = 0;
  size_t i = 0, n = code.size();
  auto fail = [&](const std::string& what) {
    throw InputError("'" + path + "' is not a valid TorchScript file: " + record + " " + what,
                     "the code nests deeper than " + std::to_string(kMaxNesting) + " levels");
  };
  while (i < n) {
    char c = code[i];
    if (c == '#') {
      while (i < n && code[i] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      bool triple = i + 2 < n && code[i + 1] == c && code[i + 2] == c;
      size_t len = triple ? 3 : 1;
      i += len;
      while (i < n) {
        if (code[i] == '\\') {
          i += 2;
          continue;
        }
        if (code[i] == c && (!triple || (i + 2 < n && code[i + 1] == c && code[i + 2] == c))) {
          i += len;
          break;
        }
        ++i;
      }
      unary = 0;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') {
      if (++depth > kMaxNesting) fail("nests brackets more than " + std::to_string(kMaxNesting) + " deep");
    } else if (c == ')' || c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    }
    if (c == '-' || c == '+' || c == '~') {
      if (++unary > kMaxNesting) fail("chains more than " + std::to_string(kMaxNesting) + " prefix operators");
    } else if (code.compare(i, 4, "not ") == 0) {
      if (++unary > kMaxNesting) fail("chains more than " + std::to_string(kMaxNesting) + " prefix operators");
      i += 3;
    } else if (c != ' ' && c != '\t' && c != '(' && c != '\n' && c != '\r') {
      unary = 0;
    }
    ++i;
  }
}

// Elements the view reaches, plus one: offset + sum((size - 1) * stride) + 1, or -1 when the
// arithmetic overflows or a stride is negative.
int64_t view_extent(const at::Tensor& t) {
  int64_t end = t.storage_offset();
  if (end < 0) return -1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t size = t.sizes()[static_cast<size_t>(d)], stride = t.strides()[static_cast<size_t>(d)];
    if (size == 0) return 0;
    if (stride < 0) return -1;
    int64_t step;
    if (__builtin_mul_overflow(size - 1, stride, &step) || __builtin_add_overflow(end, step, &end)) return -1;
  }
  return end + 1;
}

void walk_ivalue(const c10::IValue& v, const std::string& what, int depth, std::set<const void*>& seen);

void check_object(const c10::intrusive_ptr<c10::ivalue::Object>& obj, const std::string& what, int depth,
                  std::set<const void*>& seen) {
  if (!seen.insert(obj.get()).second) return;
  const auto& type = obj->type();
  for (size_t i = 0; i < obj->slots().size(); ++i) {
    std::string name = i < type->numAttributes() ? type->getAttributeName(i) : std::to_string(i);
    walk_ivalue(obj->getSlot(i), what.empty() ? name : what + "." + name, depth + 1, seen);
  }
}

void walk_ivalue(const c10::IValue& v, const std::string& what, int depth, std::set<const void*>& seen) {
  if (depth > kMaxNesting) throw InputError("module attribute '" + what + "' nests too deeply");
  if (v.isTensor()) {
    check_tensor_storage(v.toTensor(), what);
  } else if (v.isObject()) {
    check_object(v.toObject(), what, depth, seen);
  } else if (v.isList()) {
    auto l = v.toListRef();
    for (size_t i = 0; i < l.size(); ++i) walk_ivalue(l[i], what + "[" + std::to_string(i) + "]", depth + 1, seen);
  } else if (v.isTuple()) {
    const auto& e = v.toTupleRef().elements();
    for (size_t i = 0; i < e.size(); ++i) walk_ivalue(e[i], what + "[" + std::to_string(i) + "]", depth + 1, seen);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) walk_ivalue(kv.value(), what + "[...]", depth + 1, seen);
  }
}

void check_block_constants(torch::jit::Block* b, const std::string& method) {
  for (torch::jit::Node* n : b->nodes()) {
    if (n->kind() == c10::prim::Constant && n->outputs().size() == 1 && n->output()->type()->cast<c10::TensorType>()) {
      auto iv = torch::jit::toIValue(n->output());
      if (iv && iv->isTensor()) check_tensor_storage(iv->toTensor(), "a tensor constant of " + method);
    }
    for (torch::jit::Block* sub : n->blocks()) check_block_constants(sub, method);
  }
}

// The storages a pickle references: ('storage', torch.XStorage, key, location, numel) tuples
// given to BINPERSID. libtorch sizes a storage by this numel but fills it from the record, so a
// record shorter than numel * element size leaves the tail of the tensor past the record's
// buffer. Only the opcodes that build such tuples are modelled; others keep the mark stack right.
struct StorageRef {
  std::string type, key;
  int64_t numel = -1;
};

std::vector<StorageRef> pickle_storages(const char* p, size_t n, const std::string& what) {
  struct V {
    enum K { Other, Str, Int, Mark, Tuple } k = Other;
    std::string s;
    int64_t i = 0;
    std::vector<V> items;
  };
  std::vector<V> st;
  std::map<uint64_t, V> memo;
  std::vector<StorageRef> out;
  size_t i = 0;
  auto bad = [&] { return InputError(what + " is truncated or corrupt"); };
  auto need = [&](size_t k) {
    if (k > n - i) throw bad();
  };
  auto le = [&](size_t k) {
    need(k);
    uint64_t v = 0;
    for (size_t b = 0; b < k; ++b) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i + b])) << (8 * b);
    i += k;
    return v;
  };
  auto pop = [&] {
    if (st.empty()) throw bad();
    V v = std::move(st.back());
    st.pop_back();
    return v;
  };
  auto pop_mark = [&] {
    std::vector<V> items;
    while (!st.empty() && st.back().k != V::Mark) items.push_back(pop());
    if (st.empty()) throw bad();
    st.pop_back();
    std::reverse(items.begin(), items.end());
    return items;
  };
  auto str = [&](size_t len) {
    need(len);
    V v{V::Str, std::string(p + i, len), 0, {}};
    i += len;
    st.push_back(std::move(v));
  };
  auto line = [&] {
    size_t e = i;
    while (e < n && p[e] != '\n') ++e;
    if (e >= n) throw bad();
    std::string r(p + i, e - i);
    i = e + 1;
    return r;
  };
  while (i < n) {
    unsigned char op = static_cast<unsigned char>(p[i++]);
    switch (op) {
      case '.': return out;
      case '(': st.push_back({V::Mark, {}, 0, {}}); break;
      case 'X': case 'B': case 'T': str(le(4)); break;
      case 0x8c: case 'C': case 'U': str(le(1)); break;
      case 0x8d: case 0x8e: str(le(8)); break;
      case 'J': st.push_back({V::Int, {}, static_cast<int32_t>(le(4)), {}}); break;
      case 'K': st.push_back({V::Int, {}, static_cast<int64_t>(le(1)), {}}); break;
      case 'M': st.push_back({V::Int, {}, static_cast<int64_t>(le(2)), {}}); break;
      case 0x8a: {  // LONG1: little-endian two's complement of the given length
        size_t len = le(1);
        need(len);
        int64_t v = 0;
        for (size_t b = 0; b < len && b < 8; ++b) v |= static_cast<int64_t>(static_cast<unsigned char>(p[i + b])) << (8 * b);
        if (len > 0 && len < 8 && (static_cast<unsigned char>(p[i + len - 1]) & 0x80)) v -= int64_t{1} << (8 * len);
        i += len;
        st.push_back({V::Int, {}, v, {}});
        break;
      }
      case 0x8b: i += le(4); st.push_back({}); break;  // LONG4: too long for a numel
      case 'c': {
        std::string mod = line();
        st.push_back({V::Str, mod + "." + line(), 0, {}});
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        V name = pop(), mod = pop();
        st.push_back({V::Str, mod.s + "." + name.s, 0, {}});
        break;
      }
      case 'q': memo[le(1)] = st.empty() ? V{} : st.back(); break;
      case 'r': memo[le(4)] = st.empty() ? V{} : st.back(); break;
      case 0x94: memo[memo.size()] = st.empty() ? V{} : st.back(); break;
      case 'h': st.push_back(memo[le(1)]); break;
      case 'j': st.push_back(memo[le(4)]); break;
      case 't': st.push_back({V::Tuple, {}, 0, pop_mark()}); break;
      case ')': st.push_back({V::Tuple, {}, 0, {}}); break;
      case 0x85: case 0x86: case 0x87: {
        size_t k = op - 0x84u;
        V t{V::Tuple, {}, 0, {}};
        for (size_t j = 0; j < k; ++j) t.items.insert(t.items.begin(), pop());
        st.push_back(std::move(t));
        break;
      }
      case 'Q': {  // BINPERSID
        V pid = pop();
        if (pid.k == V::Tuple && pid.items.size() >= 5 && pid.items[0].s == "storage")
          out.push_back({pid.items[1].s, pid.items[2].s, pid.items[4].k == V::Int ? pid.items[4].i : -1});
        st.push_back({});
        break;
      }
      case 0x80: le(1); break;  // PROTO
      case 0x95: le(8); break;  // FRAME
      case 'G': le(8); st.push_back({}); break;
      case 'N': case 0x88: case 0x89: case ']': case '}': case 0x8f: st.push_back({}); break;
      case 'a': case 'b': case '0': pop(); break;  // APPEND, BUILD, POP
      case 's': pop(), pop(); break;               // SETITEM
      case 'R': case 0x81: pop(), pop(), st.push_back({}); break;  // REDUCE, NEWOBJ
      case 0x92: pop(), pop(), pop(), st.push_back({}); break;     // NEWOBJ_EX
      case 'e': case 'u': case 0x90: case '1': pop_mark(); break;  // APPENDS, SETITEMS, ADDITEMS, POP_MARK
      case 0x91: pop_mark(), st.push_back({}); break;              // FROZENSET
      case '2': st.push_back(st.empty() ? V{} : st.back()); break; // DUP
      default: throw InputError(what + " uses pickle opcode " + std::to_string(op) + ", which TorchScript files do not");
    }
  }
  throw bad();
}

}  // namespace

void check_tensor_storage(const at::Tensor& t, const std::string& what) {
  if (!t.defined() || !t.has_storage() || t.numel() == 0) return;
  int64_t extent = view_extent(t);
  int64_t item = static_cast<int64_t>(t.element_size()), need;
  if (extent < 0 || __builtin_mul_overflow(extent, item, &need) ||
      need > static_cast<int64_t>(t.storage().nbytes()))
    throw InputError("tensor '" + what + "' of shape " + c10::str(t.sizes()) + " and strides " + c10::str(t.strides()) +
                         " reaches past its data (" + std::to_string(t.storage().nbytes()) + " bytes)",
                     "the file is truncated or corrupt; save it again");
}

void check_torchscript_archive(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader r(path);
    // Each storage record must hold the elements its pickle declares.
    for (const char* pkl : {"data", "constants"}) {
      std::string name = std::string(pkl) + ".pkl";
      if (!r.hasRecord(name)) continue;
      auto [data, size] = r.getRecord(name);
      for (const StorageRef& s : pickle_storages(static_cast<const char*>(data.get()), size, "'" + path + "' " + name)) {
        std::string rec = std::string(pkl) + "/" + s.key;
        if (!r.hasRecord(rec)) throw InputError("'" + path + "' has no record " + rec + ", which " + name + " uses");
        size_t es = c10::elementSize(storage_dtype(s.type));
        // libtorch 1.13 has no size-only query; the record is read (and dropped) here.
        size_t have = std::get<1>(r.getRecord(rec));
        if (s.numel < 0 || static_cast<uint64_t>(s.numel) > have / es)
          throw InputError("'" + path + "': weight record " + rec + " has " + std::to_string(have) + " bytes, but " +
                               name + " declares " + std::to_string(s.numel) + " elements of " + std::to_string(es) +
                               " bytes (it reaches past its data)",
                           "the file is truncated or corrupt; save it again");
      }
    }
    for (const std::string& rec : r.getAllRecords()) {
      bool code = rec.rfind("code/", 0) == 0 && rec.size() > 3 && rec.compare(rec.size() - 3, 3, ".py") == 0;
      bool pickle = rec.size() > 4 && rec.compare(rec.size() - 4, 4, ".pkl") == 0;
      if (pickle) {
        auto [data, size] = r.getRecord(rec);
        check_pickle_memo(static_cast<const char*>(data.get()), size, rec, path);
      }
      if (!code) continue;
      auto [data, size] = r.getRecord(rec);
      std::string text(static_cast<const char*>(data.get()), size);
      check_code_nesting(text, rec, path);
      check_module_class_bodies(text, rec, path);
    }
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    throw InputError("cannot read TorchScript file '" + path + "': " + msg.substr(0, msg.find('\n')));
  }
}

void check_module_tensors(const torch::jit::Module& module) {
  std::set<const void*> seen;
  check_object(module._ivalue(), "", 0, seen);
  for (const auto& m : module.modules())
    for (const auto& method : m.get_methods()) check_block_constants(method.graph()->block(), method.name() + "()");
}

void run_with_large_stack(const std::function<void()>& f) {
  // libtorch's parser and unpickler recurse per nesting level; what the checks above let through
  // still gets room. The stack is reserved address space, touched only as deep as it is used.
  constexpr size_t kStack = size_t{512} << 20;
  struct Job {
    const std::function<void()>* f;
    std::exception_ptr error;
  } job{&f, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStack);
  pthread_t th;
  auto body = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    try {
      (*j->f)();
    } catch (...) {
      j->error = std::current_exception();
    }
    return nullptr;
  };
  int rc = pthread_create(&th, &attr, body, &job);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    f();  // no thread to be had: run here, unprotected
    return;
  }
  pthread_join(th, nullptr);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace t2o
