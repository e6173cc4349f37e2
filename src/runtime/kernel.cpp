#include "runtime/kernel.h"

#include <algorithm>

namespace t2o {

const Tensor& KernelContext::input(int i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required but absent");
  const RValue& v = input_value(i);
  if (!v.is_tensor()) fail("input " + std::to_string(i) + " must be a tensor");
  return v.tensor;
}

void KernelContext::fail(const std::string& what) const { throw Error(node().describe() + ": " + what); }

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry* r = [] {
    auto* reg = new KernelRegistry;
    extern void register_builtin_kernels(KernelRegistry&);
    register_builtin_kernels(*reg);
    return reg;
  }();
  return *r;
}

namespace {
std::string norm_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }
}  // namespace

void KernelRegistry::add(const std::string& domain, const std::string& op_type, int since_version, KernelFactory f) {
  auto& v = table_[{norm_domain(domain), op_type}];
  for (auto& e : v)
    if (e.since == since_version) {
      e.factory = std::move(f);
      return;
    }
  v.push_back({since_version, std::move(f)});
  std::sort(v.begin(), v.end(), [](const Entry& a, const Entry& b) { return a.since < b.since; });
}

const KernelFactory* KernelRegistry::find(const std::string& domain, const std::string& op_type, int64_t opset) const {
  auto it = table_.find({norm_domain(domain), op_type});
  if (it == table_.end()) return nullptr;
  const KernelFactory* best = nullptr;
  for (const auto& e : it->second)
    if (e.since <= opset || opset <= 0) best = &e.factory;
  return best;
}

bool KernelRegistry::has_op(const std::string& domain, const std::string& op_type) const {
  return table_.count({norm_domain(domain), op_type}) > 0;
}

std::vector<KernelKey> KernelRegistry::keys() const {
  std::vector<KernelKey> r;
  for (const auto& [k, v] : table_)
    for (const auto& e : v) r.push_back({k.first, k.second, e.since});
  return r;
}

}  // namespace t2o
