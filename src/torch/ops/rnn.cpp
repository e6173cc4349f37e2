// Recurrent layers (aten::lstm/gru/rnn_tanh/rnn_relu and the *_cell ops) -> ONNX LSTM/GRU/RNN.
// Not converted yet: these ops are reported as unsupported with their source lines.
#include "torch/ops/ops.h"

namespace t2o {

void register_rnn_ops(OpTable&) {}

}  // namespace t2o
