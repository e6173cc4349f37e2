// Every model of the ONNX backend test data loads, round-trips faithfully, and keeps its verdict
// under the checker: valid originals (checker + strict shape inference, straight from the file)
// pass `check` after the trip, invalid ones fail it.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <filesystem>

#include "onnx/check.h"
#include "onnx/model_io.h"

namespace fs = std::filesystem;
using namespace t2o;

namespace {

std::vector<fs::path> all_models() {
  std::vector<fs::path> r;
  for (const auto& e : fs::recursive_directory_iterator(T2O_TESTDATA))
    if (e.is_regular_file() && e.path().filename() == "model.onnx") r.push_back(e.path());
  std::sort(r.begin(), r.end());
  return r;
}

bool original_is_valid(const fs::path& p) {
  onnx::ModelProto proto;
  std::string bytes = read_file(p.string());
  if (!proto.ParseFromString(bytes)) return false;
  try {
    onnx::checker::check_model(proto);
    onnx::ShapeInferenceOptions opts{true, 1, false};
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), opts);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

TEST(OnnxRoundTrip, EveryBackendTestModel) {
  auto models = all_models();
  ASSERT_GT(models.size(), 1000u) << "ONNX backend test data missing under " << T2O_TESTDATA;
  int valid = 0, checked = 0;
  std::vector<std::string> check_failures;
  for (const auto& p : models) {
    SCOPED_TRACE(p.string());
    Model a = load_model(p.string());
    std::string bytes = save_model_to_bytes(a);
    Model b = load_model_from_bytes(bytes, p.parent_path().string());
    std::string why;
    EXPECT_TRUE(equal(a, b, &why)) << why;
    // A second trip is byte-identical: serialization is deterministic.
    EXPECT_EQ(bytes, save_model_to_bytes(b));
    bool orig_valid = original_is_valid(p);
    bool ours_valid = true;
    std::string reason;
    try {
      check_model(b);
    } catch (const Error& e) {
      ours_valid = false;
      reason = e.what();
    }
    valid += orig_valid;
    checked += ours_valid;
    if (orig_valid != ours_valid)
      check_failures.push_back(p.parent_path().filename().string() + ": original " +
                               (orig_valid ? "valid" : "invalid") + ", round-tripped " + (ours_valid ? "valid" : reason));
  }
  for (const auto& f : check_failures) ADD_FAILURE() << f;
  std::printf("%zu models round-tripped; %d valid, %d pass check\n", models.size(), valid, checked);
  EXPECT_GT(valid, 1000);
  EXPECT_EQ(valid, checked);
}
