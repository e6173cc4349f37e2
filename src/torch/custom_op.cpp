#include "torch/custom_op.h"

#include <dlfcn.h>

#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <map>
#include <mutex>
#include <set>

#include "runtime/plugin_abi.h"

namespace t2o {

namespace tj = torch::jit;

namespace {

std::map<std::string, Converter>& converters() {
  static std::map<std::string, Converter> m;
  return m;
}

// Kernels of runtime plugins, loaded here through the plugin C ABI so the converter can run a
// custom op while it learns shapes without linking the runtime.
std::map<std::pair<std::string, std::string>, T2oComputeFn>& plugin_kernels() {
  static std::map<std::pair<std::string, std::string>, T2oComputeFn> m;
  return m;
}

void load_plugin_kernels(const std::string& path) {
  static std::set<std::string> loaded;
  if (!loaded.insert(path).second) return;
  std::string p = path.find('/') == std::string::npos ? "./" + path : path;
  void* h = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw InputError("cannot load plugin '" + path + "': " + ::dlerror());
  auto init = reinterpret_cast<T2oPluginInitFn>(::dlsym(h, T2O_PLUGIN_INIT_SYMBOL));
  if (!init) throw InputError("plugin '" + path + "' does not export " T2O_PLUGIN_INIT_SYMBOL);
  T2oPluginHost host{T2O_PLUGIN_ABI_VERSION, nullptr, [](void*, const T2oOpDef* d) -> int32_t {
                       plugin_kernels()[{d->domain ? d->domain : "", d->op_type}] = d->compute;
                       return 0;
                     }};
  if (init(&host) != 0) throw InputError("plugin '" + path + "' failed to initialise");
}

// One call of a plugin kernel on torch tensors.
struct TorchCall {
  std::vector<at::Tensor> inputs;
  std::map<std::string, c10::IValue> attrs;
  std::vector<at::Tensor> outputs;
  std::string error;
};

TorchCall& call(void* ctx) { return *static_cast<TorchCall*>(ctx); }

const T2oKernelApi kTorchApi = {
    [](void* ctx) -> int32_t { return static_cast<int32_t>(call(ctx).inputs.size()); },
    [](void* ctx, int32_t i, T2oTensor* out) -> int32_t {
      auto& c = call(ctx);
      if (i < 0 || static_cast<size_t>(i) >= c.inputs.size() || !c.inputs[i].defined()) return 1;
      const at::Tensor& t = c.inputs[i];
      out->dtype = static_cast<int32_t>(dtype_from_scalar_type(t.scalar_type()));
      out->rank = static_cast<int32_t>(t.dim());
      out->dims = t.sizes().data();
      out->data = t.data_ptr();
      return 0;
    },
    [](void* ctx, int32_t i, int32_t dtype, int32_t rank, const int64_t* dims) -> void* {
      auto& c = call(ctx);
      if (i < 0 || i > 64) return nullptr;
      if (c.outputs.size() <= static_cast<size_t>(i)) c.outputs.resize(i + 1);
      c.outputs[i] = at::zeros(std::vector<int64_t>(dims, dims + rank),
                               at::TensorOptions().dtype(scalar_type_from_dtype(static_cast<DType>(dtype))));
      return c.outputs[i].data_ptr();
    },
    [](void* ctx, const char* name, int64_t dflt) -> int64_t {
      auto& a = call(ctx).attrs;
      auto it = a.find(name);
      return it == a.end() ? dflt : it->second.isBool() ? it->second.toBool() : it->second.toInt();
    },
    [](void* ctx, const char* name, double dflt) -> double {
      auto& a = call(ctx).attrs;
      auto it = a.find(name);
      return it == a.end() ? dflt : it->second.toScalar().toDouble();
    },
    [](void* ctx, const char* name, int64_t* out, int32_t cap) -> int32_t {
      auto& a = call(ctx).attrs;
      auto it = a.find(name);
      if (it == a.end() || !it->second.isIntList()) return -1;
      auto v = it->second.toIntVector();
      for (size_t k = 0; k < v.size() && k < static_cast<size_t>(cap); ++k) out[k] = v[k];
      return static_cast<int32_t>(v.size());
    },
    [](void* ctx, const char* message) { call(ctx).error = message ? message : "unknown error"; },
};

bool is_tensor_arg(const c10::Argument& a) {
  auto t = a.type();
  if (t->kind() == c10::TypeKind::OptionalType) t = t->expect<c10::OptionalType>()->getElementType();
  return t->kind() == c10::TypeKind::TensorType;
}

// The profiling kernel of a declared op that no loaded library implements.
tj::Operation stand_in(const CustomOpSpec& spec, const c10::FunctionSchema& schema,
                       const std::function<void(const std::string&)>& warn) {
  return [spec, schema, warn](tj::Stack& stack) {
    size_t n = schema.arguments().size();
    std::vector<c10::IValue> args(stack.end() - static_cast<long>(n), stack.end());
    tj::drop(stack, n);
    TorchCall c;
    for (size_t k = 0; k < n; ++k) {
      const auto& a = schema.arguments()[k];
      if (is_tensor_arg(a)) c.inputs.push_back(args[k].isTensor() ? args[k].toTensor().contiguous() : at::Tensor());
      else c.attrs[a.name()] = args[k];
    }
    size_t n_out = schema.returns().size();
    // Per process: plugin kernels stay loaded, and a later libtorch run (verify) reuses this.
    auto it = plugin_kernels().find({spec.domain, spec.op_type});
    if (it != plugin_kernels().end()) {
      if (it->second(&kTorchApi, &c) != 0)
        throw Error(spec.op_type + " (plugin) failed while learning shapes: " + c.error);
    } else {
      static std::set<std::string> warned;
      if (warn && warned.insert(spec.name).second)
        warn("no kernel for " + spec.name + " while learning shapes: assuming its outputs are shaped like its "
             "first tensor argument (give --plugin with a kernel for " + spec.domain + "::" + spec.op_type +
             " for exact shapes)");
      at::Tensor like = c.inputs.empty() ? at::zeros({}) : c.inputs[0];
      c.outputs.assign(n_out, at::zeros_like(like));
    }
    if (c.outputs.size() < n_out) throw Error(spec.op_type + " (plugin) did not set all outputs");
    for (size_t k = 0; k < n_out; ++k) stack.emplace_back(c.outputs[k]);
  };
}

Attribute to_attribute(const std::string& name, const c10::IValue& v) {
  if (v.isBool()) return Attribute::make_int(name, v.toBool());
  if (v.isInt()) return Attribute::make_int(name, v.toInt());
  if (v.isDouble()) return Attribute::make_float(name, static_cast<float>(v.toDouble()));
  if (v.isString()) return Attribute::make_string(name, v.toStringRef());
  if (v.isIntList()) return Attribute::make_ints(name, v.toIntVector());
  if (v.isDoubleList()) {
    std::vector<float> f;
    for (double d : v.toDoubleVector()) f.push_back(static_cast<float>(d));
    return Attribute::make_floats(name, f);
  }
  throw UnsupportedError("argument '" + name + "' of type " + v.tagKind() + " cannot be an ONNX attribute");
}

}  // namespace

CustomOpSpec parse_custom_op(const std::string& spec) {
  // The schema may itself hold '=' (default values); the target after the last one never does.
  auto eq = spec.rfind('=');
  auto bad = [&](const std::string& why) {
    return Error("--custom-op '" + spec + "': " + why,
                 "write SCHEMA=DOMAIN::OP, e.g. 'mylib::cbr(Tensor x, Tensor w, Tensor b) -> Tensor=mylib::Cbr'",
                 kExitUsage);
  };
  if (eq == std::string::npos) throw bad("no '=DOMAIN::OP' target");
  CustomOpSpec s;
  s.schema = spec.substr(0, eq);
  std::string target = spec.substr(eq + 1);
  auto sep = target.find("::");
  if (sep == std::string::npos || sep == 0 || sep + 2 >= target.size() || target.find('(') != std::string::npos)
    throw bad("target '" + target + "' is not DOMAIN::OP");
  s.domain = target.substr(0, sep);
  s.op_type = target.substr(sep + 2);
  try {
    s.name = tj::parseSchema(s.schema).name();
  } catch (const std::exception& e) {
    std::string m = e.what();
    throw bad("bad schema: " + m.substr(0, m.find('\n')));
  }
  if (s.name.find("::") == std::string::npos) throw bad("the schema name needs a namespace, e.g. mylib::cbr");
  return s;
}

void register_custom_ops(const std::vector<std::string>& specs, const std::vector<std::string>& plugins,
                         const std::function<void(const std::string&)>& warn) {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  for (const auto& p : plugins) load_plugin_kernels(p);
  static std::set<std::string> registered;
  for (const auto& text : specs) {
    CustomOpSpec spec = parse_custom_op(text);
    c10::FunctionSchema schema = tj::parseSchema(spec.schema);
    bool known = !tj::getAllOperatorsFor(c10::Symbol::fromQualString(spec.name)).empty();
    if (!known && registered.insert(spec.name).second)
      tj::registerOperator(tj::Operator(spec.schema, stand_in(spec, schema, warn), c10::AliasAnalysisKind::FROM_SCHEMA));
    converters()[spec.name] = [spec](Ctx& c, const TNode* n) {
      const auto& args = n->schema().arguments();
      std::vector<std::string> inputs;
      std::vector<Attribute> attrs;
      for (size_t k = 0; k < args.size() && k < n->inputs().size(); ++k) {
        if (is_tensor_arg(args[k])) {
          inputs.push_back(c.is_none(n, k) ? std::string() : c.t(n, k));
        } else if (!c.is_none(n, k)) {
          if (!c.is_const(n, k))
            throw UnsupportedError("argument '" + args[k].name() + "' must be known at conversion time");
          attrs.push_back(to_attribute(args[k].name(), c.cval(n, k)));
        }
      }
      while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
      int n_out = static_cast<int>(n->outputs().size());
      auto outs = c.b.op(spec.op_type, inputs, attrs, n_out);
      for (Node& node : c.b.graph().nodes)
        if (!node.outputs.empty() && node.outputs[0] == outs[0]) node.domain = spec.domain;
      for (int k = 0; k < n_out; ++k) c.out(n, k, outs[k]);
    };
  }
}

const Converter* custom_op_converter(const std::string& kind) {
  auto it = converters().find(kind);
  return it == converters().end() ? nullptr : &it->second;
}

void add_custom_domains(Model& model) {
  std::set<std::string> have;
  for (const auto& o : model.opset_import) have.insert(o.domain);
  model.graph.for_each_node([&](const Node& n) {
    if (!n.domain.empty() && n.domain != "ai.onnx" && have.insert(n.domain).second)
      model.opset_import.push_back({n.domain, 1});
  });
}

}  // namespace t2o
