#pragma once
// Fast path for float32 RNN, GRU and LSTM with their default activations (RNN: Tanh, Relu or
// Sigmoid), any direction, layout, clip, peepholes and sequence lengths; the reference kernel in
// rnn.cpp keeps the rest (other activations, input_forget, float64/float16).
//
// The input projection X·Wᵀ + biases is one oneDNN matmul over the whole sequence. The recurrence
// keeps R packed in panels of 16 hidden units (all gates of those units side by side, k-major), so
// a step is one streaming pass over R per thread: each thread owns a contiguous range of units,
// computes their gates with AVX-512 (or plain loops without it) and updates them, and the threads
// meet at one spinning barrier per step (two for GRU's reset-before-product form). Each thread's
// share of R stays in its core's cache across steps.
#include <cstdint>
#include <memory>
#include <vector>

#include "ir/tensor.h"

namespace t2o::kern {

struct RnnFastSpec {
  enum class Cell { Rnn, Gru, LbrGru, Lstm } cell = Cell::Lstm;
  enum class Act { Tanh, Relu, Sigmoid } act = Act::Tanh;  // Cell::Rnn only
  int dirs = 1;              // 2: bidirectional
  bool reverse = false;      // dirs == 1: direction "reverse"
  bool batch_first = false;  // ONNX layout 1
  bool has_clip = false;
  float clip = 0;
};

class RnnFast {
 public:
  explicit RnnFast(const RnnFastSpec& spec);
  ~RnnFast();
  RnnFast(const RnnFast&) = delete;
  RnnFast& operator=(const RnnFast&) = delete;

  // W, R and B are initializers: their packed forms are made once and kept.
  void set_constant_weights(bool constant);

  // int8 mode (CPUs with AVX-512 VNNI: rnn_int8_supported()): the weights are the constant int8
  // Wq [D, G*H, I] and Rq [D, G*H, H] with scales Ws, Rs (one, or one per row G*H shared by the
  // directions) and zero point 0. The activations are quantized at run time, symmetrically per
  // row to [-127, 127] (X once per run, h before each step's product), the products summed
  // exactly in int32 and scaled back to float; the gates stay float. run() then ignores its w and r
  // arguments. The tensors must outlive this object (session initializers).
  void set_int8_weights(const Tensor& wq, const Tensor& ws, const Tensor& rq, const Tensor& rs);
  // X [S, B, I] ([B, S, I] batch first), W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H], lens (B
  // values in [0, S]; empty: all S), h0/c0 as Yh ([D, B, H]; [B, D, H] batch first), P [D, 3*H];
  // optional ones null. Y ([S, D, B, H] or [B, S, D, H]), Yh and Yc are written where not null
  // (Y's steps past a row's length are zeros). Shapes must already be checked.
  void run(const Tensor& x, const Tensor& w, const Tensor& r, const Tensor* b, const std::vector<int64_t>& lens,
           const Tensor* h0, const Tensor* c0, const Tensor* p, int64_t hidden, int threads, Tensor* y, Tensor* yh,
           Tensor* yc);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Layers the fast path has run in this process (tests check that it was taken); of those, in int8.
uint64_t rnn_fast_runs();
uint64_t rnn_int8_runs();
bool rnn_int8_supported();

}  // namespace t2o::kern
