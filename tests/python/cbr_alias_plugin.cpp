// The example plugin's kernel (examples/custom_op/cbr_plugin.cpp, mylib::Cbr) registered under
// the name the seed's custom-op snippet emits, onnx_test::cbr: same inputs (x, w, b, scale,
// shift) and attribute (padding). The example is compiled in unchanged; only its init is wrapped.
#define t2o_plugin_init cbr_example_plugin_init
#include "cbr_plugin.cpp"
#undef t2o_plugin_init

namespace {

int32_t register_as_onnx_test(void* host, const T2oOpDef* def) {
  const auto* real = static_cast<const T2oPluginHost*>(host);
  T2oOpDef alias = *def;
  alias.domain = "onnx_test";
  alias.op_type = "cbr";
  return real->register_op(real->host, &alias);
}

}  // namespace

extern "C" int32_t t2o_plugin_init(const T2oPluginHost* host) {
  T2oPluginHost proxy{host->abi_version, const_cast<T2oPluginHost*>(host), register_as_onnx_test};
  return cbr_example_plugin_init(&proxy);
}
