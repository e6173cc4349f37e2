#include "runtime/plugin.h"

#include <dlfcn.h>

#include <algorithm>
#include <mutex>

namespace t2o {

namespace {

// State behind the opaque ctx pointer a plugin kernel receives.
struct CallState {
  KernelContext* kc;
  std::string error;
};

CallState& st(void* ctx) { return *static_cast<CallState*>(ctx); }

const Attribute* attr(void* ctx, const char* name) { return st(ctx).kc->node().find_attr(name); }

const T2oKernelApi kApi = {
    [](void* ctx) -> int32_t { return st(ctx).kc->num_inputs(); },
    [](void* ctx, int32_t i, T2oTensor* out) -> int32_t {
      KernelContext& kc = *st(ctx).kc;
      if (i < 0 || i >= kc.num_inputs() || !kc.has_input(i) || !kc.input_value(i).is_tensor()) return 1;
      const Tensor& t = kc.input(i);
      out->dtype = static_cast<int32_t>(t.dtype());
      out->rank = t.rank();
      out->dims = t.dims().data();
      out->data = const_cast<void*>(t.raw());
      return 0;
    },
    [](void* ctx, int32_t i, int32_t dtype, int32_t rank, const int64_t* dims) -> void* {
      CallState& s = st(ctx);
      if (i < 0 || i >= s.kc->num_outputs() || !dtype_is_valid(dtype) || rank < 0) {
        s.error = "allocate_output: bad output index, dtype or rank";
        return nullptr;
      }
      Dims d(dims, dims + rank);
      return s.kc->allocate_output(i, static_cast<DType>(dtype), d).raw();
    },
    [](void* ctx, const char* name, int64_t dflt) -> int64_t {
      const Attribute* a = attr(ctx, name);
      return a ? a->i : dflt;
    },
    [](void* ctx, const char* name, double dflt) -> double {
      const Attribute* a = attr(ctx, name);
      return a ? a->f : dflt;
    },
    [](void* ctx, const char* name, int64_t* out, int32_t cap) -> int32_t {
      const Attribute* a = attr(ctx, name);
      if (!a) return -1;
      int32_t n = static_cast<int32_t>(a->ints.size());
      std::copy_n(a->ints.begin(), std::min(n, cap), out);
      return n;
    },
    [](void* ctx, const char* message) { st(ctx).error = message ? message : "unknown error"; },
};

class PluginKernel : public OpKernel {
 public:
  explicit PluginKernel(T2oComputeFn f) : f_(f) {}
  void run(KernelContext& kc) override {
    CallState s{&kc, {}};
    if (f_(&kApi, &s) != 0) kc.fail("plugin kernel failed: " + (s.error.empty() ? "no message" : s.error));
  }

 private:
  T2oComputeFn f_;
};

struct Loading {
  KernelRegistry* reg;
  std::vector<PluginOp>* ops;
};

int32_t register_op(void* host, const T2oOpDef* def) {
  auto& l = *static_cast<Loading*>(host);
  if (!def || !def->op_type || !def->compute) return 1;
  PluginOp op{def->domain ? def->domain : "", def->op_type, def->since_version};
  T2oComputeFn f = def->compute;
  l.reg->add(op.domain, op.op_type, op.since_version,
             [f](const KernelInfo&) { return std::make_unique<PluginKernel>(f); });
  l.ops->push_back(op);
  return 0;
}

}  // namespace

std::vector<PluginOp> load_plugin(const std::string& path, KernelRegistry& reg) {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  // A bare file name would make dlopen search the library path; a plugin is always a file.
  std::string p = path.find('/') == std::string::npos ? "./" + path : path;
  // Never dlclose: registered kernels point into the library.
  void* h = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    throw InputError("cannot load plugin '" + path + "': " + (e ? e : "unknown error"),
                     "build it as a shared library (see examples/custom_op)");
  }
  auto init = reinterpret_cast<T2oPluginInitFn>(::dlsym(h, T2O_PLUGIN_INIT_SYMBOL));
  if (!init)
    throw InputError("plugin '" + path + "' does not export " T2O_PLUGIN_INIT_SYMBOL,
                     "declare it as extern \"C\" int32_t t2o_plugin_init(const T2oPluginHost*) (runtime/plugin_abi.h)");
  std::vector<PluginOp> ops;
  Loading l{&reg, &ops};
  T2oPluginHost host{T2O_PLUGIN_ABI_VERSION, &l, register_op};
  if (init(&host) != 0)
    throw InputError("plugin '" + path + "' failed to initialise",
                     "it may have been built for another plugin ABI version (this is version " +
                         std::to_string(T2O_PLUGIN_ABI_VERSION) + ")");
  return ops;
}

}  // namespace t2o
