#include "torch/ops/ops.h"
namespace t2o {
void register_rnn_ops(OpTable&) {}
}
