// run_model MODEL.onnx INPUT.pb EXPECTED.pb: runs the model's one input through t2o::Session, both
// into a runtime-allocated output and into a buffer of our own, and compares with EXPECTED.
#include <cmath>
#include <cstdio>
#include <vector>

#include "onnx/tensor_io.h"
#include "runtime/session.h"

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  try {
    t2o::Session s = t2o::Session::from_file(argv[1], {.threads = 1});
    t2o::Tensor in = t2o::read_tensor_pb(argv[2]);
    t2o::Tensor want = t2o::read_tensor_pb(argv[3]);
    const std::string& out_name = s.outputs().at(0).name;
    auto out = s.run({{s.inputs().at(0).name, in}});
    std::vector<float> mine(static_cast<size_t>(want.numel()));
    t2o::Tensor buf = t2o::Tensor::borrow(t2o::DType::Float, want.dims(), mine.data());
    s.run({{s.inputs().at(0).name, in}}, {{out_name, buf}});
    const t2o::Tensor& got = out.at(out_name).tensor;
    if (got.dims() != want.dims()) return 1;
    double worst = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      worst = std::fmax(worst, std::fabs(got.as_double(i) - want.as_double(i)));
      if (mine[static_cast<size_t>(i)] != got.data<float>()[i]) return 1;
    }
    std::printf("%s: %s %s, max abs diff %.3g\n", argv[1], out_name.c_str(), t2o::dims_to_string(got.dims()).c_str(),
                worst);
    return worst < 1e-4 ? 0 : 1;
  } catch (const t2o::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_code();
  }
}
