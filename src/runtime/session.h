#pragma once
// Session: the public entry point of the runtime. Build once from a model, run many times.
//
//   t2o::Session s(t2o::load_model("model.onnx"), {.threads = 2});
//   auto out = s.run({{"input", t2o::Tensor::borrow(t2o::DType::Float, {1, 3, 224, 224}, data)}});
//
// Inputs are borrowed, not copied. Wrong names, dtypes, ranks or sizes against the model's
// declared inputs throw t2o::Error.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/value.h"

namespace t2o {

struct SessionOptions {
  int threads = 0;          // 0: all cores
  bool fast_paths = true;   // false: reference kernels only
};

class GraphExec;

class Session {
 public:
  explicit Session(Model model, SessionOptions opts = {});
  static Session from_file(const std::string& path, SessionOptions opts = {});
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  // Inputs the caller must feed (initializers excluded), with types and symbolic dims.
  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;
  const Model& model() const;

  std::map<std::string, RValue> run(const std::map<std::string, RValue>& inputs);
  // Positional: inputs in the order of inputs(), outputs in the order of outputs().
  std::vector<RValue> run_ordered(const std::vector<RValue>& inputs);

  // Every intermediate value too (for verification); names as in the graph.
  std::map<std::string, RValue> run_all(const std::map<std::string, RValue>& inputs);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Sets the thread count of every library the runtime uses (OpenMP, oneDNN).
void set_runtime_threads(int threads);

// Re-executes the program with OMP_WAIT_POLICY=passive unless the variable is set. libgomp spins
// at barriers by default and reads the variable only when it loads; on a shared, loaded machine a
// spinning thread holds a core its sibling needs (MobileNetV2 at 2 threads, load ~12: ~1070 ms
// spinning vs ~30 ms passive). Call first thing in main(); returns if re-execution fails.
void prefer_passive_omp_wait(char** argv);

}  // namespace t2o
