#pragma once
// int8 quantization of an ONNX model into standard ONNX of the model's own opset.
//
//   dynamic: constant float weights of MatMul/Gemm become int8 initializers (symmetric, per tensor
//            or per output column); activations are quantized at run time by
//            DynamicQuantizeLinear and multiplied by MatMulInteger, then rescaled to float.
//   static:  activation ranges are calibrated by running the float model on input sets; every
//            float input of Conv/MatMul/Gemm gets a QuantizeLinear/DequantizeLinear pair (uint8,
//            asymmetric) and constant weights are stored as int8 behind a DequantizeLinear
//            (symmetric, per tensor or per output channel). The QOperator format writes
//            QLinearConv/QLinearMatMul with calibrated output parameters instead.
//   fp16:    float32 weights and compute become float16, except ops that need float32 for
//            accuracy or by their signature; graph inputs/outputs stay float32 unless asked.
//
//   t2o::QuantizeOptions o;
//   o.mode = t2o::QuantMode::Static;
//   o.calibration = t2o::load_input_sets(model, {"calib/"});
//   t2o::QuantizeResult r = t2o::quantize(model, o);  // rewrites `model` in place
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace t2o {

enum class QuantMode { Dynamic, Static, Float16 };
enum class CalibMethod { MinMax, Percentile, Entropy };
enum class QuantFormat { QDQ, QOperator };

// One value per graph input, as fed to Session::run.
using InputSet = std::map<std::string, Tensor>;

struct QuantizeOptions {
  QuantMode mode = QuantMode::Dynamic;
  CalibMethod method = CalibMethod::MinMax;
  double percentile = 99.99;          // Percentile: the range keeps this share of the values
  QuantFormat format = QuantFormat::QDQ;  // static: QDQ pairs, or QLinearConv/QLinearMatMul
  bool keep_io_float32 = true;        // Float16: graph inputs and outputs stay float32 (Casts at the edges)
  bool per_channel = false;           // weights: one scale per output channel/column
  std::vector<std::string> exclude;   // node names or op types left in float
  std::vector<InputSet> calibration;  // static: empty means generated inputs (warned)
  int generated_samples = 8;          // static, when no calibration is given
  std::map<std::string, Dims> input_sizes;  // sizes of generated sets per input (default: small)
  uint64_t seed = 1;
  int threads = 0;                    // runtime threads for calibration (0: all cores)
  std::function<void(const std::string&)> warn;
  std::function<void(const std::string&)> progress;  // a status line per calibration set ("" when done)
};

struct QuantizeResult {
  int quantized = 0;                    // nodes rewritten
  std::map<std::string, int> by_op;     // of those, per op type
  std::vector<std::string> skipped;     // "MatMul 'fc' (model.py:3): why" for candidates left in float
  int calibration_samples = 0;
  bool generated_calibration = false;
  int64_t initializer_bytes_before = 0, initializer_bytes_after = 0;
};

// Throws Error (exit 3) when the model's opset lacks the ops the mode needs, InputError (exit 4)
// for calibration data that does not fit the model. The result passes the ONNX checker when the
// input does.
QuantizeResult quantize(Model& m, const QuantizeOptions& o);

// Input sets from files: a .npy/.pb file (a single-input model; one set, or one set per entry of
// its first axis when it has one more axis than the input), a folder of such files, a folder
// holding NAME.npy (or NAME.pb, input_K.pb) for every input, or a folder of such folders.
std::vector<InputSet> load_input_sets(const Model& m, const std::vector<std::string>& paths);
// Generated input sets (normal floats, integers inside what they index), as the optimizer's proof
// makes them, all at the sizes of the first: `sizes` where given, else dynamic dims start small
// (2, then 8, 32 until the model runs). Throws Error when the model cannot run on them.
std::vector<InputSet> generate_input_sets(const Model& m, int n, uint64_t seed, int threads = 0,
                                          const std::map<std::string, Dims>& sizes = {});

struct OutputAccuracy {
  std::string name;
  double max_abs = 0;             // largest |quantized - float| over all sets
  double cosine = 1;              // of the outputs flattened over all sets
  std::optional<double> top1;     // class logits (rank 2, dim 1 > 1): share of rows whose argmax agrees
  int64_t rows = 0;               // rows behind top1
  int64_t classes = 0;            // distinct argmax classes of the float model over those rows: with 1,
                                  // top-1 agreement says little (a random-weight model often has 1)
};

struct AccuracyReport {
  std::vector<OutputAccuracy> outputs;
  int samples = 0;
  double float_ms = 0, quant_ms = 0;  // median latency over `runs` runs of the first set
  int runs = 0;
  // Worst over outputs of the top-1 agreement drop (classifiers) or 1 - cosine (others).
  double drop() const;
};

// Runs both models on every set (fast paths) and compares the quantized outputs to the float ones.
AccuracyReport compare_accuracy(const Model& float_model, const Model& quant_model, const std::vector<InputSet>& sets,
                                int runs = 5, int threads = 0);

}  // namespace t2o
