#include "cli/triton.h"

#include <cstdio>

#include "serve/triton.h"

namespace t2o::cli {

void write_triton_bundle(const Model& m, const std::string& repo, const std::string& onnx_path, int max_batch,
                         bool quiet) {
  TritonOptions o;
  o.name = serving_name(onnx_path);
  o.max_batch = max_batch;
  TritonBundle b = write_triton_repo(m, repo, o);
  if (quiet) return;
  std::printf("wrote Triton model %s (%s), KServe manifest %s\n", b.model_dir.c_str(),
              b.max_batch_size > 0 ? ("max_batch_size " + std::to_string(b.max_batch_size) + " on axis 0 '" +
                                      b.batch_dim + "'").c_str()
                                   : "no batching",
              b.manifest_path.c_str());
}

}  // namespace t2o::cli
