#include "torch/ops/ops.h"
namespace t2o {
void register_control_ops(OpTable&) {}
void register_index_ops(OpTable&) {}
void register_creation_ops(OpTable&) {}
void register_resize_ops(OpTable&) {}
void register_rnn_ops(OpTable&) {}
}
