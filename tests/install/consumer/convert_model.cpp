// convert_model MODEL.pt OUT.onnx: converts with t2o::convert_torchscript (the input size is given
// below), writes the ONNX model and runs it once.
#include <cstdio>

#include "onnx/model_io.h"
#include "runtime/session.h"
#include "torch/convert.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  try {
    t2o::ConvertOptions o;
    o.inputs.push_back({"input", {2, 4}, t2o::DType::Float});  // nn.Sequential names it `input`
    o.dynamic.push_back({"input", {{0, "batch"}}});
    t2o::ConvertResult r = t2o::convert_torchscript(argv[1], o);
    t2o::save_model(r.model, argv[2]);
    t2o::Session s(std::move(r.model));
    auto out = s.run({{"input", t2o::Tensor(t2o::DType::Float, {3, 4})}});
    std::printf("converted %s: output %s\n", argv[1], t2o::dims_to_string(out.begin()->second.tensor.dims()).c_str());
    return 0;
  } catch (const t2o::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_code();
  }
}
