#include "torch/weights.h"

#include <caffe2/serialize/inline_container.h>

#include <fstream>
#include <map>
#include <set>

#include "ir/error.h"

namespace t2o {

namespace {

// Walks pickle opcodes far enough to collect GLOBAL / STACK_GLOBAL class references; tensors are
// never materialized, so this is cheap even for large checkpoints.
std::vector<std::string> pickle_globals(const char* p, size_t n) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::vector<std::string> strings;  // recent string pushes, for STACK_GLOBAL
  size_t i = 0;
  auto need = [&](size_t k) {
    if (i + k > n) throw InputError("data.pkl is truncated");
  };
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(p[at + static_cast<size_t>(k)]);
    return v;
  };
  auto line = [&] {
    size_t e = i;
    while (e < n && p[e] != '\n') ++e;
    std::string s(p + i, e - i);
    i = e + 1;
    return s;
  };
  auto add = [&](const std::string& mod, const std::string& name) {
    std::string g = mod + "." + name;
    if (seen.insert(g).second) out.push_back(g);
  };
  while (i < n) {
    unsigned char op = static_cast<unsigned char>(p[i++]);
    switch (op) {
      case '.': return out;  // STOP
      case 'c': case 'i': {  // GLOBAL, INST
        std::string mod = line();
        add(mod, line());
        break;
      }
      case 0x93:  // STACK_GLOBAL
        if (strings.size() >= 2) add(strings[strings.size() - 2], strings.back());
        break;
      case 'X': case 'B': case 'T': {  // 4-byte length strings
        need(4);
        size_t len = u32(i);
        need(4 + len);
        if (op == 'X') strings.emplace_back(p + i + 4, len);
        i += 4 + len;
        break;
      }
      case 0x8c: case 'C': case 'U': {  // 1-byte length strings
        need(1);
        size_t len = static_cast<unsigned char>(p[i]);
        need(1 + len);
        if (op == 0x8c) strings.emplace_back(p + i + 1, len);
        i += 1 + len;
        break;
      }
      case 0x8d: case 0x8e: case 0x96: {  // 8-byte length
        need(8);
        uint64_t len = u32(i) | (static_cast<uint64_t>(u32(i + 4)) << 32);
        i += 8 + len;
        break;
      }
      case 0x8a: need(1); i += 1 + static_cast<unsigned char>(p[i]); break;  // LONG1
      case 0x8b: need(4); i += 4 + u32(i); break;                             // LONG4
      case 0x95: i += 8; break;                                               // FRAME
      case 0x80: case 'K': case 'q': case 'h': case 0x82: i += 1; break;
      case 'M': case 0x83: i += 2; break;
      case 'J': case 'r': case 'j': case 0x84: i += 4; break;
      case 'G': i += 8; break;
      case 'P': case 'I': case 'L': case 'S': case 'V': case 'F': case 'g': case 'p': line(); break;
      default: break;  // no-argument opcodes
    }
  }
  return out;
}

bool is_module_class(const std::string& g) {
  static const char* plain[] = {"torch._utils.", "torch.", "collections.", "builtins.", "copyreg.", "_codecs.",
                                "numpy.", "torch.serialization."};
  if (g.rfind("torch.nn.", 0) == 0) return true;
  for (const char* pre : plain)
    if (g.rfind(pre, 0) == 0) return false;
  return true;
}

std::string short_message(const c10::Error& e) {
  std::string m = e.what_without_backtrace();
  return m.substr(0, m.find('\n'));
}

}  // namespace

bool is_zip_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char sig[4] = {};
  f.read(sig, 4);
  return f.gcount() == 4 && sig[0] == 'P' && sig[1] == 'K' && sig[2] == 3 && sig[3] == 4;
}

SavedFile classify_saved_file(const std::string& path) {
  if (!std::ifstream(path)) throw InputError("cannot open '" + path + "'");
  if (!is_zip_file(path))
    throw InputError("'" + path + "' is not a zip archive, so neither TorchScript nor a torch.save file",
                     "files from torch.save before PyTorch 1.6 (legacy format) must be re-saved with a newer torch");
  SavedFile s;
  try {
    caffe2::serialize::PyTorchStreamReader r(path);
    if (r.hasRecord("constants.pkl") || r.hasRecord("bytecode.pkl")) {
      s.kind = SavedFile::Kind::TorchScript;
      return s;
    }
    if (!r.hasRecord("data.pkl")) return s;
    auto [data, size] = r.getRecord("data.pkl");
    s.globals = pickle_globals(static_cast<const char*>(data.get()), size);
  } catch (const c10::Error& e) {
    throw InputError("cannot read '" + path + "': " + short_message(e));
  }
  s.kind = SavedFile::Kind::StateDict;
  std::string nn_class;
  for (const auto& g : s.globals) {
    if (!is_module_class(g)) continue;
    if (g.rfind("torch.nn.", 0) != 0) {
      s.main_class = g;
      break;
    }
    if (nn_class.empty()) nn_class = g;
  }
  if (s.main_class.empty()) s.main_class = nn_class;
  if (!s.main_class.empty()) s.kind = SavedFile::Kind::PickledModule;
  return s;
}

std::vector<std::pair<std::string, at::Tensor>> read_state_dict(const std::string& path) {
  SavedFile s = classify_saved_file(path);
  if (s.kind == SavedFile::Kind::TorchScript)
    throw InputError("'" + path + "' is a TorchScript model, not a state_dict",
                     "convert it directly: torch2onnx convert " + path);
  if (s.kind == SavedFile::Kind::PickledModule)
    throw InputError("'" + path + "' is a pickled Python module (class " + s.main_class +
                         "), saved with torch.save(model): only Python can rebuild that class",
                     "in Python, save TorchScript instead: torch.jit.script(model).save('model.pt') (or "
                     "torch.jit.trace(model, example).save(...)); or save torch.save(model.state_dict(), "
                     "'weights.pth') and convert a TorchScript architecture with --weights weights.pth");
  try {
    return unpickle_state_dict(path);
  } catch (const c10::Error& e) {
    throw InputError("cannot read the state_dict in '" + path + "': " + short_message(e));
  }
}

void explain_non_torchscript(const std::string& path) {
  SavedFile s;
  try {
    s = classify_saved_file(path);
  } catch (const Error&) {
    return;
  }
  if (s.kind == SavedFile::Kind::PickledModule) read_state_dict(path);  // throws the class message
  if (s.kind == SavedFile::Kind::StateDict)
    throw InputError("'" + path + "' is a state_dict (weights only, saved with torch.save(model.state_dict())): "
                         "it holds no architecture to convert",
                     "convert a TorchScript model of the architecture and load these weights into it: "
                     "torch2onnx convert ARCH.pt --weights " + path + " (see `torch2onnx inspect " + path + "`)");
}

void load_weights(torch::jit::Module& module, const std::string& path,
                  const std::function<void(const std::string&)>& warn) {
  auto sd = read_state_dict(path);
  std::map<std::string, at::Tensor> want;
  for (const auto& p : module.named_parameters(true)) want[p.name] = p.value;
  for (const auto& b : module.named_buffers(true)) want[b.name] = b.value;
  std::map<std::string, at::Tensor> have(sd.begin(), sd.end());
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [k, t] : want)
    if (!have.count(k)) missing.push_back(k);
  for (const auto& [k, t] : have) {
    auto it = want.find(k);
    if (it == want.end()) unexpected.push_back(k);
    else if (it->second.sizes() != t.sizes())
      mismatched.push_back(k + " (model " + c10::str(it->second.sizes()) + ", file " + c10::str(t.sizes()) + ")");
  }
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (size_t i = 0; i < v.size() && i < 12; ++i) s += (i ? ", " : "") + v[i];
      if (v.size() > 12) s += ", ... (" + std::to_string(v.size()) + " in all)";
      return s;
    };
    std::string msg = "the weights in '" + path + "' do not fit the model:";
    if (!missing.empty()) msg += "\n  missing keys: " + list(missing);
    if (!unexpected.empty()) msg += "\n  unexpected keys: " + list(unexpected);
    if (!mismatched.empty()) msg += "\n  shape mismatches: " + list(mismatched);
    throw InputError(msg, "the state_dict must come from the same architecture as the TorchScript model "
                          "(same submodule names and shapes); see `torch2onnx inspect " + path + "`");
  }
  torch::NoGradGuard guard;
  for (auto& [k, t] : want) t.copy_(have.at(k));
  (void)warn;  // strict loading leaves nothing to warn about; kept for dtype notes later
}

}  // namespace t2o
