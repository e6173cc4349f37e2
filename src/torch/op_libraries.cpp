// Operator libraries a TorchScript file may call into. libtorch resolves every op when a file
// loads, so a file whose graph calls torchvision::nms or torchvision::roi_align (torchvision's
// detectors) loads only once the library registering them is in the process. torchvision's `_C`
// extension registers them from plain C++ static initialisers and needs no Python, so it is
// dlopen'ed when a file asks for a torchvision op and the library is installed.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "torch/frontend.h"

namespace t2o {
namespace {

namespace fs = std::filesystem;

// T2O_TORCHVISION_LIB names the library; else torchvision's package directory of the system Python
// (Debian's python3-torchvision) or of a local pip install.
std::vector<fs::path> torchvision_candidates() {
  std::vector<fs::path> r;
  if (const char* e = std::getenv("T2O_TORCHVISION_LIB"); e && *e) {
    r.emplace_back(e);
    return r;
  }
  std::vector<fs::path> dirs{"/usr/lib/python3/dist-packages/torchvision"};
  std::error_code ec;
  for (const char* root : {"/usr/local/lib", "/usr/lib"})
    for (const auto& py : fs::directory_iterator(root, ec))
      if (py.path().filename().string().rfind("python3", 0) == 0)
        for (const char* sub : {"dist-packages", "site-packages"}) dirs.push_back(py.path() / sub / "torchvision");
  for (const auto& d : dirs)
    for (const auto& f : fs::directory_iterator(d, ec)) {
      std::string name = f.path().filename().string();
      if (name.rfind("_C.", 0) == 0 && name.size() > 3 && name.substr(name.size() - 3) == ".so") r.push_back(f.path());
    }
  return r;
}

}  // namespace

std::string load_torchvision_ops() {
  static std::once_flag once;
  static std::string loaded;
  std::call_once(once, [] {
    for (const auto& p : torchvision_candidates())
      if (dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
        loaded = p.string();
        return;
      }
  });
  return loaded;
}

}  // namespace t2o
