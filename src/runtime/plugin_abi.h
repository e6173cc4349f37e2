/* torch2onnx custom-op plugin ABI, version 1.
 *
 * A plugin is a shared library that exports
 *
 *     extern "C" int t2o_plugin_init(const T2oPluginHost* host);
 *
 * and calls host->register_op once per op it implements. It is plain C on purpose: a plugin
 * built with another compiler, standard library or torch2onnx version keeps working as long as
 * abi_version matches, and the converter (which links libtorch, not the runtime) can load the
 * same plugin to run custom ops while it learns shapes.
 *
 * Element types are ONNX TensorProto.DataType numbers (1 float, 7 int64, 11 double, ...).
 * Tensors are dense and row-major.
 */
#ifndef T2O_PLUGIN_ABI_H
#define T2O_PLUGIN_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define T2O_PLUGIN_ABI_VERSION 1

typedef struct T2oTensor {
  int32_t dtype;
  int32_t rank;
  const int64_t* dims; /* rank entries */
  void* data;          /* inputs: read only */
} T2oTensor;

/* What a kernel can ask of the node it runs for. `ctx` is opaque. Functions returning int return
 * 0 on success. */
typedef struct T2oKernelApi {
  int32_t (*num_inputs)(void* ctx);
  int32_t (*input)(void* ctx, int32_t i, T2oTensor* out); /* nonzero: absent */
  /* Allocates output i and returns its data pointer (NULL on failure). */
  void* (*allocate_output)(void* ctx, int32_t i, int32_t dtype, int32_t rank, const int64_t* dims);
  int64_t (*attr_int)(void* ctx, const char* name, int64_t dflt);
  double (*attr_float)(void* ctx, const char* name, double dflt);
  /* Copies up to `cap` ints of a list attribute into out; returns the list length, -1 if absent. */
  int32_t (*attr_ints)(void* ctx, const char* name, int64_t* out, int32_t cap);
  /* Records an error message; the kernel then returns nonzero. */
  void (*set_error)(void* ctx, const char* message);
} T2oKernelApi;

/* Runs the op: returns 0 on success, nonzero after api->set_error. */
typedef int32_t (*T2oComputeFn)(const T2oKernelApi* api, void* ctx);

typedef struct T2oOpDef {
  const char* domain;    /* e.g. "mylib" */
  const char* op_type;   /* e.g. "Cbr" */
  int32_t since_version; /* opset version of `domain` from which this kernel applies, usually 1 */
  T2oComputeFn compute;
} T2oOpDef;

typedef struct T2oPluginHost {
  uint32_t abi_version; /* T2O_PLUGIN_ABI_VERSION of the host */
  void* host;
  int32_t (*register_op)(void* host, const T2oOpDef* def);
} T2oPluginHost;

typedef int32_t (*T2oPluginInitFn)(const T2oPluginHost* host);
#define T2O_PLUGIN_INIT_SYMBOL "t2o_plugin_init"

#ifdef __cplusplus
}
#endif

#endif /* T2O_PLUGIN_ABI_H */
