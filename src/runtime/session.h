#pragma once
// Session: the public entry point of the runtime. Build once from a model, run many times.
//
//   t2o::Session s(t2o::load_model("model.onnx"), {.threads = 2});
//   auto out = s.run({{"input", t2o::Tensor::borrow(t2o::DType::Float, {1, 3, 224, 224}, data)}});
//
// Inputs are borrowed, not copied. Wrong names, dtypes, ranks or sizes against the model's
// declared inputs throw t2o::Error. One Session may run on several threads at once.
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
  // A run that takes longer than this stops before its next node (in Loop and Scan bodies too)
  // with an InputError; 0: no limit. A guard for models whose loops run on as long as their data
  // says (a Loop trip count of 10^17 in a 100-byte file).
  double time_limit_s = 0;
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
  // Runs with outputs written into the caller's buffers: `outputs` maps output names to tensors
  // over the caller's memory (Tensor::borrow) with the dtype and dims the run produces. The node
  // computing an output writes straight into its buffer when it allocates its result; otherwise
  // (an output that is an input or a constant, or one computed in place) the result is copied
  // there. Returns every output; bound ones share the caller's memory. Throws t2o::Error for an
  // unknown name, a buffer that overlaps an input, or one whose dtype or dims differ from the
  // result (known before running for static output shapes, else after: contents unspecified).
  std::map<std::string, RValue> run(const std::map<std::string, RValue>& inputs,
                                    const std::map<std::string, Tensor>& outputs);
  // Positional: inputs in the order of inputs(), outputs in the order of outputs().
  std::vector<RValue> run_ordered(const std::vector<RValue>& inputs);

  // Every intermediate value too (for verification); names as in the graph.
  std::map<std::string, RValue> run_all(const std::map<std::string, RValue>& inputs);

  // Activation buffers taken from the system allocator so far (the main graph's). Repeated runs
  // at the same sizes reuse freed buffers, so this stops growing after the first run unless
  // the caller keeps the outputs (run into bound buffers to keep them without allocating).
  size_t fresh_buffers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Sets the thread count of every library the runtime uses (OpenMP, oneDNN).
void set_runtime_threads(int threads);

// Chooses how idle OpenMP threads wait, unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, and
// re-executes the program with that setting (libgomp reads it only when it loads). A thread
// that sleeps at every barrier pays a wake-up per parallel region: on a quiet 2-core machine
// MobileNetV2 at 2 threads took 13 ms passive against 4.6 ms spinning briefly. A spinning
// thread on a busy machine holds a core its sibling needs: with two other busy processes it
// took 28 ms spinning briefly against 9 ms passive (and ~1 s spinning as long as libgomp's
// default). So: a short spin (GOMP_SPINCOUNT=10000) when no other task is runnable at start,
// else passive. Call first thing in main(); returns if re-execution fails.
void choose_omp_wait(char** argv);

}  // namespace t2o
