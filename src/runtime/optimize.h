#pragma once
// Runtime graph rewrites, applied by Session at build when fast paths are on (never with
// fast_paths=false, so reference runs and run_all see the graph as written).
//
// First, Conv, ConvTranspose, MatMul and Gemm reading a constant float16 input (fp16 models)
// compute in float32 on the fast kernels: float32 copies of the constants, an internal::HalfToFloat
// (a Cast to float32 that takes only float16) of each other input (shared, "<name>#as_f32") and a Cast of the result back to float16 under its name.
// Then DequantizeLinear of constant int32 values (other quantizers' biases) folds to float, and a
// QLinearConv with int8 weights of zero point 0 becomes an Int8Conv on 8-bit NCHW (VNNI only).
// Then quantized products become int8 products (runtime/kernels/int8.h):
//   ai.torch2onnx.internal::Int8MatMul(A, Wq, Ws, [bias], [x_scale, x_zero_point])  [trans_b]
// for the dynamic chain DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(a_scale * Ws)
// [-> Add bias] (the same values bit for bit) and, on CPUs with VNNI, for a static QDQ MatMul or
// Gemm (QuantizeLinear -> DequantizeLinear on A, DequantizeLinear of constant int8 weights with
// zero point 0); and
//   ai.torch2onnx.internal::Int8Conv(X, Wq, Ws, [B], [x_scale, x_zero_point], [y_scale, y_zero_point])
// for a static QDQ 2-d Conv (VNNI only) and, without x_scale, for the dynamic chain
// DynamicQuantizeLinear -> ConvInteger (4-D int8 weights, zero point 0) -> Cast -> Mul(a_scale *
// Ws) [-> Add bias] (Ws and B one value or one per output channel, as [M, 1, 1] or [1, M, 1, 1]);
// it later takes the post-ops below, a residual sum's R as its input 8 (float). The quantizing
// nodes go when nothing else reads them. An activation
// written by an Int8Conv and read only by Int8Convs (as X or as R) stays channels-last:
// quantized 8-bit when every reader takes it as X with one scale and zero point (the writer's
// y_scale / y_zero_point, the readers' src_quantized), else float (dst_nhwc / src_nhwc, res_nhwc
// for R); renamed "<name>#quantized" / "<name>#nhwc".
//
// An LSTM, GRU or RNN named in the model's metadata under kInt8RecurrentKey (one name per line;
// `torch2onnx quantize` writes it for the recurrent layers it quantizes), whose W and R are
// DequantizeLinear of constant int8 weights with zero point 0 (per tensor, or per row of G*H:
// axis 1), becomes, on CPUs with AVX-512 VNNI,
//   ai.torch2onnx.internal::Int8LSTM | Int8GRU | Int8RNN(X, Wq, Rq, [B, ...its inputs 3-7], Ws, Rs)
// with the op's attributes: the products run in int8 with the activations (X, and h at every
// step) quantized per row at run time (kern::RnnFast). The metadata is the file's consent to that
// approximation: without it the layer runs in float on the dequantized weights, as written.
//
// DequantizeLinear nodes whose inputs are all initializers (int8 weights of QDQ models) are
// replaced by the float initializers they compute, so the ops reading them see constant weights.
// A QuantizeLinear -> DequantizeLinear pair with one constant scale and zero point (a static QDQ
// model's activations) becomes internal::QuantDequant(X, scale, zero_point), the same values in
// one threaded pass.
//
// Scaled dot-product attention as PyTorch's multi-head attention exports it (q, k, v [B, S, H, D]
// each through a Transpose, MatMul, Div / Mul by a constant scalar, Where with a constant fill or
// Add of a mask, Softmax on the last axis, MatMul, Transpose back, each intermediate read once)
// becomes
//   ai.torch2onnx.internal::Attention(q, k, v, [mask]) -> [B, Sq, H, Dv]  [scale, mask "where" | "add", fill]
// which reads the heads in place and keeps each head's scores in cache between the two products.
//
// Conv followed by activations and/or a residual Add becomes one node
//   ai.torch2onnx.internal::FusedConv(X, W, [B], [R])
// carrying Conv's attributes plus `post_ops` (names, applied in order), `post_alpha` and
// `post_beta` (one value each per post-op). Post-ops: "relu" (alpha = negative slope, so
// LeakyRelu too), "clip" (alpha..beta), "swish" (x*sigmoid(x)), "hardswish", "sum" (+ R).
// A value is fused away only when its single reader is the next op of the chain and it is not a
// graph output, so the names that remain carry the same values as in the unfused graph.
// `keep_nan` = 1 marks a FusedConv with a Relu (slope 0) or Clip post-op whose inputs may hold a
// NaN or an infinity even when the run's inputs do not (a constant holds one, or an op such as
// Log, Sqrt, Exp, a Div by anything but non-zero constants, or an op of another domain lies
// upstream): oneDNN's max / min would turn a NaN into a number, so its post-ops run as written.
// Runs whose inputs hold one do the same (KernelContext::nonfinite_inputs). `nonfinite_in` = 1
// marks any Conv / FusedConv with such an input, post-ops or not: it does not take Winograd,
// whose transforms would spread a NaN or an infinity over a whole tile. A MaxPool (and the
// BlockedPool it may become) takes the same mark on the same terms: oneDNN's max pooling skips a
// NaN that PyTorch would return.
//
// Then activations between 2-d convs go channel-blocked (attributes src_block / dst_block /
// res_block = oneDNN's block size), under new names "<name>#blocked"; any other reader gets the
// NCHW value under the original name from a FromBlocked(channels) node. This removes the
// reorders oneDNN would otherwise run on both sides of every conv. An Int8Conv with a float X or Y
// (not channels-last, not quantized, no residual sum) takes part too: it quantizes blocked X into
// the channels-last bytes it computes on and reorders its result into blocks, so float convs
// next to int8 ones (dynamic models quantize only some) keep their layout. A 2-d MaxPool (no Indices) or
// AveragePool between them passes the layout on: it becomes
//   ai.torch2onnx.internal::BlockedPool(X)  [its attributes, kind "max" | "avg", block, channels]
// with X and its output blocked (ResNet's stem: conv -> max-pool -> convs with no reorder). A
// GlobalAveragePool / GlobalMaxPool reading a blocked value becomes
//   ai.torch2onnx.internal::BlockedGlobalPool(X)  [kind "avg" | "max", block, channels]
// which writes the plain [N, C, 1, 1] result (the classifier head needs no reorder). A
// squeeze-and-excitation Mul (X from such a conv, S = Sigmoid or HardSigmoid of a conv with as
// many output channels, either order) passes the layout on too: it becomes
//   ai.torch2onnx.internal::BlockedScale(X, S)  [block, channels]
// with X and its output blocked (EfficientNet and MobileNetV3 blocks keep their layout from the
// expansion to the projection); an S that is not one value per channel (and image) is multiplied
// as Mul would, the output's layout then following the broadcast shape. A Concat on the channel
// axis of such convs' outputs, each but the last of whole blocks, becomes
//   ai.torch2onnx.internal::BlockedConcat(X...)  [block, channels = each input's count]
// which lays the inputs' blocks one after the other (SqueezeNet, GoogLeNet, Inception).
#include "ir/graph.h"

namespace t2o {

inline constexpr const char* kInternalDomain = "ai.torch2onnx.internal";
inline constexpr const char* kInt8RecurrentKey = "ai.torch2onnx.int8_recurrent";

// Rewrites `m` in place; returns how many rewrites it made (0: the graph is unchanged).
int optimize_for_runtime(Model& m);

}  // namespace t2o
