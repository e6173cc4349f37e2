// The table of built-in kernel families; each family file registers its own ops.
#include "runtime/kernel.h"

namespace t2o {

void register_elementwise_kernels(KernelRegistry&);
void register_activation_kernels(KernelRegistry&);
void register_shape_kernels(KernelRegistry&);
void register_indexing_kernels(KernelRegistry&);
void register_tensor_kernels(KernelRegistry&);
void register_resize_kernels(KernelRegistry&);
void register_conv_kernels(KernelRegistry&);
void register_pool_kernels(KernelRegistry&);
void register_matmul_kernels(KernelRegistry&);
void register_attention_kernels(KernelRegistry&);
void register_reduce_kernels(KernelRegistry&);
void register_norm_kernels(KernelRegistry&);
void register_quant_kernels(KernelRegistry&);
void register_rnn_kernels(KernelRegistry&);
void register_control_flow_kernels(KernelRegistry&);
void register_sequence_kernels(KernelRegistry&);
void register_misc_kernels(KernelRegistry&);
void register_signal_kernels(KernelRegistry&);
void register_gradient_kernels(KernelRegistry&);

void register_builtin_kernels(KernelRegistry& r) {
  register_elementwise_kernels(r);
  register_activation_kernels(r);
  register_shape_kernels(r);
  register_indexing_kernels(r);
  register_tensor_kernels(r);
  register_resize_kernels(r);
  register_conv_kernels(r);
  register_pool_kernels(r);
  register_matmul_kernels(r);
  register_attention_kernels(r);
  register_reduce_kernels(r);
  register_norm_kernels(r);
  register_quant_kernels(r);
  register_rnn_kernels(r);
  register_control_flow_kernels(r);
  register_sequence_kernels(r);
  register_misc_kernels(r);
  register_signal_kernels(r);
  register_gradient_kernels(r);
}

}  // namespace t2o
