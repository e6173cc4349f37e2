#include "torch/inspect_torch.h"

#include "torch/frontend.h"

#include <torch/script.h>

#include "ir/error.h"
#include "torch/profile.h"
#include "torch/weights.h"

namespace t2o {

namespace {

TensorEntry entry(const std::string& name, const at::Tensor& t) {
  TensorEntry e;
  e.name = name;
  DType d = dtype_from_scalar_type(t.scalar_type());
  e.dtype = d == DType::Undefined ? std::string(c10::toString(t.scalar_type())) : std::string(dtype_name(d));
  e.shape = t.sizes().vec();
  e.numel = t.numel();
  return e;
}

// torch.nn.utils.spectral_norm leaves LAYER.weight_orig/_u/_v; the parametrizations API leaves
// LAYER.parametrizations.weight.original (plus _u/_v buffers inside the parametrization).
std::vector<std::string> spectral_layers(const std::vector<TensorEntry>& ts) {
  std::vector<std::string> r;
  auto ends = [](const std::string& s, const std::string& suf) {
    return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
  };
  for (const auto& t : ts) {
    std::string layer = t.name;
    auto k = t.name.find("parametrizations.weight.original");
    if (ends(t.name, "weight_orig")) layer.resize(t.name.size() - 11);
    else if (k != std::string::npos) layer.resize(k);
    else continue;
    if (!layer.empty() && layer.back() == '.') layer.pop_back();
    r.push_back(layer.empty() ? "(root)" : layer);
  }
  return r;
}

}  // namespace

TorchFileReport inspect_torch_file(const std::string& path) {
  TorchFileReport rep;
  rep.file = classify_saved_file(path);
  if (rep.file.kind == SavedFile::Kind::TorchScript) {
    torch::jit::Module m = load_module(path);
    for (const auto& p : m.named_parameters(true)) rep.tensors.push_back(entry(p.name, p.value));
    for (const auto& b : m.named_buffers(true)) rep.tensors.push_back(entry(b.name, b.value));
    for (const auto& s : m.named_modules())
      if (s.value.is_training()) rep.training_modules.push_back(s.name.empty() ? "(root)" : s.name);
    if (auto f = m.find_method(forward_method_name(m))) {
      const auto& args = f->function().getSchema().arguments();
      for (size_t i = 1; i < args.size(); ++i) rep.forward_args.push_back(args[i].name() + ": " + args[i].type()->str());
    }
  } else if (rep.file.kind == SavedFile::Kind::StateDict) {
    for (const auto& [k, t] : read_state_dict(path)) rep.tensors.push_back(entry(k, t));
  }
  rep.spectral_norm_layers = spectral_layers(rep.tensors);
  return rep;
}

}  // namespace t2o
