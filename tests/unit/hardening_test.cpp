// Hostile and broken inputs at the library level: sizes that overflow, payloads that do not match
// their dims, external data that escapes the model folder, NaN where integers are needed, and a
// session build that must stay linear. Each test names the class of issue 16 it guards.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <chrono>
#include <ctime>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "onnx/check.h"
#include "onnx/model_io.h"
#include "onnx/tensor_io.h"
#include "test_support.h"

#if defined(__SANITIZE_ADDRESS__)
#define T2O_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T2O_ASAN 1
#endif
#endif

namespace fs = std::filesystem;
using namespace t2o;
using t2o::test::In;

namespace {

constexpr int64_t k2p62 = int64_t{1} << 62;

fs::path temp_dir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("t2o_hard_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// Runs f and returns the exit code of the t2o::Error it throws (-1 when it throws nothing).
template <typename F>
int error_code(F&& f, std::string* msg = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (msg) *msg = e.what();
    return e.exit_code();
  }
  return -1;
}

// A memory limit for the scope of a test.
struct MemoryLimit {
  size_t old = memory_limit();
  explicit MemoryLimit(size_t bytes) { set_memory_limit(bytes); }
  ~MemoryLimit() { set_memory_limit(old); }
};

// A model whose one Identity reads initializer "w" of the given proto.
onnx::ModelProto identity_of(const onnx::TensorProto& w) {
  onnx::ModelProto p;
  p.set_ir_version(8);
  p.add_opset_import()->set_version(17);
  auto* g = p.mutable_graph();
  g->set_name("g");
  *g->add_initializer() = w;
  auto* n = g->add_node();
  n->set_op_type("Identity");
  n->add_input(w.name());
  n->add_output("y");
  auto* o = g->add_output();
  o->set_name("y");
  o->mutable_type()->mutable_tensor_type()->set_elem_type(w.data_type());
  return p;
}

onnx::TensorProto float_proto(const std::string& name, const Dims& dims) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  return t;
}

}  // namespace

// ---- 1. size arithmetic -------------------------------------------------------------------

TEST(HardeningSizes, ProductsOfDimsNeverWrap) {
  EXPECT_EQ(numel_of({k2p62, 1}), k2p62);
  EXPECT_EQ(error_code([] { numel_of({k2p62, 4}); }), kExitBadInput);
  EXPECT_EQ(error_code([] { numel_of({int64_t{1} << 32, int64_t{1} << 32}); }), kExitBadInput);
  // Non-zero dims are bounded even when a zero makes the tensor empty: strides stay in range.
  EXPECT_EQ(error_code([] { numel_of({0, int64_t{1} << 40, int64_t{1} << 40}); }), kExitBadInput);
  EXPECT_EQ(numel_of({0, int64_t{1} << 40}), 0);
  EXPECT_EQ(error_code([] { nbytes_of(DType::Double, {k2p62 / 2}); }), kExitBadInput);
  EXPECT_EQ(error_code([] { Tensor(DType::Float, {k2p62, 4}); }), kExitBadInput);
  EXPECT_EQ(error_code([] { checked_mul(k2p62, 2); }), kExitBadInput);
  EXPECT_EQ(checked_mul(3, 5), 15);
}

TEST(HardeningSizes, InitializerWithWrappingDimsIsInvalid) {
  // [2^62, 4] wrapped to 0 elements: a 64-byte buffer that later kernels overran.
  onnx::TensorProto w = float_proto("w", {k2p62, 4});
  std::string msg;
  EXPECT_EQ(error_code([&] { tensor_from_proto(w); }, &msg), kExitBadInput);
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  std::string bytes = identity_of(w).SerializeAsString();
  EXPECT_EQ(error_code([&] { load_model_from_bytes(bytes); }), kExitBadInput);
}

TEST(HardeningSizes, KernelsThatComputeShapesFromDataFailCleanly) {
  using test::run_op;
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  Tensor huge = Tensor::from_vector<int64_t>({k2p62, 4}, {2});
  // Tile: 4 * 2^62 wrapped to 0 and gave an empty output with exit 0.
  EXPECT_EQ(error_code([&] { run_op("Tile", {x, Tensor::from_vector<int64_t>({k2p62}, {1})}); }), kExitBadInput);
  EXPECT_EQ(error_code([&] { run_op("Expand", {x.reshaped({1, 4}), huge}); }), kExitBadInput);
  EXPECT_EQ(error_code([&] { run_op("ConstantOfShape", {huge}); }), kExitBadInput);
  // Reshape of an empty tensor to dims whose product wraps.
  Tensor empty(DType::Float, {0});
  EXPECT_EQ(error_code([&] {
              run_op("Reshape", {empty, Tensor::from_vector<int64_t>({int64_t{1} << 32, int64_t{1} << 32, 0}, {3})},
                     {Attribute::make_int("allowzero", 1)});
            }),
            kExitBadInput);
  EXPECT_EQ(error_code([&] {
              run_op("OneHot", {Tensor::from_vector<int64_t>({1, 2}, {2}), Tensor::scalar<int64_t>(k2p62),
                                Tensor::from_vector<float>({0, 1}, {2})});
            }),
            kExitBadInput);
  // MelWeightMatrix sized a scratch vector from num_mel_bins before its output was checked.
  EXPECT_EQ(error_code([&] {
              run_op("MelWeightMatrix", {Tensor::scalar<int64_t>(int64_t{1} << 40), Tensor::scalar<int64_t>(8),
                                         Tensor::scalar<int64_t>(16000), Tensor::scalar<float>(0.0f),
                                         Tensor::scalar<float>(8000.0f)});
            }),
            kExitBadInput);
}

TEST(HardeningSizes, MemoryLimitStopsAllocationsAndIsReturned) {
  size_t before = memory_in_use();
  {
    MemoryLimit lim(size_t{1} << 20);
    EXPECT_EQ(error_code([] { Tensor(DType::Float, {1 << 20}); }), kExitBadInput);
    Tensor ok(DType::Float, {1000});
    EXPECT_GT(memory_in_use(), before);
    // Kernel outputs come from the session's buffer pool, which counts too.
    std::string msg;
    EXPECT_EQ(error_code([] { test::run_op("ConstantOfShape", {Tensor::from_vector<int64_t>({1 << 20}, {1})}); }, &msg),
              kExitBadInput);
    EXPECT_NE(msg.find("memory limit"), std::string::npos) << msg;
  }
  EXPECT_EQ(memory_in_use(), before);
}

// ---- 2. external data containment --------------------------------------------------------

class HardeningExternal : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = temp_dir("ext");
    model_dir_ = root_ / "model";
    outside_ = root_ / "outside";
    fs::create_directories(model_dir_);
    fs::create_directories(outside_);
    write(outside_ / "secret.bin", std::string(16, 'S'));
  }
  void TearDown() override { fs::remove_all(root_); }
  // A model whose initializer w (4 floats) is external data at `location`.
  std::string save(const std::string& location) {
    onnx::TensorProto w = float_proto("w", {4});
    w.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = w.add_external_data();
    e->set_key("location");
    e->set_value(location);
    std::string path = (model_dir_ / "m.onnx").string();
    write(path, identity_of(w).SerializeAsString());
    return path;
  }
  fs::path root_, model_dir_, outside_;
};

TEST_F(HardeningExternal, SymlinkToAFileOutsideIsRefused) {
  fs::create_symlink(outside_ / "secret.bin", model_dir_ / "w.bin");
  std::string msg;
  EXPECT_EQ(error_code([&] { load_model(save("w.bin")); }, &msg), kExitBadInput);
  EXPECT_NE(msg.find("outside the model folder"), std::string::npos) << msg;
}

TEST_F(HardeningExternal, SymlinkedFolderIsRefused) {
  fs::create_directory_symlink(outside_, model_dir_ / "sub");
  EXPECT_EQ(error_code([&] { load_model(save("sub/secret.bin")); }), kExitBadInput);
}

TEST_F(HardeningExternal, SymlinkThatStaysInsideIsFollowed) {
  fs::create_directories(model_dir_ / "blobs");
  write(model_dir_ / "blobs" / "w", std::string(16, '\0'));
  fs::create_symlink("blobs/w", model_dir_ / "w.bin");
  Model m = load_model(save("w.bin"));
  EXPECT_EQ(m.graph.initializers.at(0).tensor.dims(), Dims{4});
}

TEST_F(HardeningExternal, FifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((model_dir_ / "w.bin").c_str(), 0600), 0);
  auto t0 = std::chrono::steady_clock::now();
  std::string msg;
  EXPECT_EQ(error_code([&] { load_model(save("w.bin")); }, &msg), kExitBadInput);
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  // A FIFO as the model file itself, too.
  ASSERT_EQ(::mkfifo((model_dir_ / "fifo.onnx").c_str(), 0600), 0);
  EXPECT_EQ(error_code([&] { load_model((model_dir_ / "fifo.onnx").string()); }), kExitBadInput);
}

TEST_F(HardeningExternal, ShortFileAndBadOffsetsAreInputErrors) {
  write(model_dir_ / "w.bin", std::string(8, '\0'));
  EXPECT_EQ(error_code([&] { load_model(save("w.bin")); }), kExitBadInput);
  onnx::TensorProto w = float_proto("w", {4});
  w.set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const char* v) {
    auto* e = w.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", "w.bin");
  add("offset", "not-a-number");
  write(model_dir_ / "m2.onnx", identity_of(w).SerializeAsString());
  EXPECT_EQ(error_code([&] { load_model((model_dir_ / "m2.onnx").string()); }), kExitBadInput);
}

TEST_F(HardeningExternal, PbInputWithExternalDataIsContainedToItsFolder) {
  fs::create_symlink(outside_ / "secret.bin", model_dir_ / "w.bin");
  onnx::TensorProto t = float_proto("x", {4});
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = t.add_external_data();
  e->set_key("location");
  e->set_value("w.bin");
  write(model_dir_ / "input_0.pb", t.SerializeAsString());
  std::string msg;
  EXPECT_EQ(error_code([&] { read_value_pb((model_dir_ / "input_0.pb").string(), "tensor"); }, &msg), kExitBadInput);
  EXPECT_NE(msg.find("input_0.pb"), std::string::npos) << msg;
}

// ---- 3. payload checked before allocation ------------------------------------------------

TEST(HardeningPayload, SmallPbDeclaringGigabytesFailsBeforeAllocating) {
  fs::path d = temp_dir("pb");
  onnx::TensorProto t = float_proto("x", {int64_t{1} << 29});  // 2 GiB of floats, no values
  std::string bytes = t.SerializeAsString();
  ASSERT_LT(bytes.size(), 16u);
  write(d / "x.pb", bytes);
  MemoryLimit lim(size_t{64} << 20);  // an allocation of the declared size would hit this
  std::string msg;
  EXPECT_EQ(error_code([&] { read_tensor_pb((d / "x.pb").string()); }, &msg), kExitBadInput);
  EXPECT_NE(msg.find("holds 0 values"), std::string::npos) << msg;
  // Odd counts of complex parts were copied past the buffer.
  onnx::TensorProto c;
  c.set_data_type(onnx::TensorProto::COMPLEX64);
  c.add_dims(1);
  for (int i = 0; i < 3; ++i) c.add_float_data(1.0f);
  EXPECT_EQ(error_code([&] { tensor_from_proto(c); }), kExitBadInput);
  fs::remove_all(d);
}

TEST(HardeningPayload, SmallNpyDeclaringGigabytesFailsBeforeAllocating) {
  fs::path d = temp_dir("npy");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824,), }";
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  write(d / "x.npy", bytes);
  MemoryLimit lim(size_t{64} << 20);
  std::string msg;
  EXPECT_EQ(error_code([&] { read_npy((d / "x.npy").string()); }, &msg), kExitBadInput);
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  // Dims that wrap, and a dim past int64.
  header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }";
  write(d / "y.npy", std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header);
  EXPECT_EQ(error_code([&] { read_npy((d / "y.npy").string()); }), kExitBadInput);
  header = "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }";
  write(d / "z.npy", std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header);
  EXPECT_EQ(error_code([&] { read_npy((d / "z.npy").string()); }), kExitBadInput);
  fs::remove_all(d);
}

// ---- 4. crashes in our code ---------------------------------------------------------------

TEST(HardeningCrashes, GraphAttributeWithoutGraphIsWrittenAndRejected) {
  onnx::ModelProto p;
  p.set_ir_version(8);
  p.add_opset_import()->set_version(17);
  auto* g = p.mutable_graph();
  auto* in = g->add_input();
  in->set_name("c");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  auto* n = g->add_node();
  n->set_op_type("If");
  n->add_input("c");
  n->add_output("y");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);  // and no graph
  }
  g->add_output()->set_name("y");
  Model m = load_model_from_bytes(p.SerializeAsString());
  EXPECT_NO_THROW(save_model_to_bytes(m));
  EXPECT_EQ(error_code([&] { check_model(m); }), kExitBadInput);
  EXPECT_NE(error_code([&] { Session s(m); }), -1);
}

TEST(HardeningCrashes, ResizeIgnoresAShortRoiOutsideCropMode) {
  // roi of 1 value for a rank-2 input was read at [i + rank].
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor roi = Tensor::from_vector<float>({0.5f}, {1});
  Tensor scales = Tensor::from_vector<float>({1, 2}, {2});
  Tensor y = test::run_op("Resize", {x, roi, scales}, {Attribute::make_string("mode", "nearest")});
  EXPECT_EQ(test::values<float>(y), (std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_NE(error_code([&] {
              test::run_op("Resize", {x, roi, scales}, {Attribute::make_string("coordinate_transformation_mode", "tf_crop_and_resize")});
            }),
            -1);
  // Infinite scales and NaN roi with crop mode are errors or defined output, not UB.
  EXPECT_NE(error_code([&] { test::run_op("Resize", {x, Tensor(DType::Float, {0}), Tensor::from_vector<float>({1, INFINITY}, {2})}); }), -1);
}

TEST(HardeningCrashes, RoiAlignOnAnEmptyImageReadsNothing) {
  // A 0-pixel-high image: the bilinear sample's corner index was h - 1 = -1.
  Tensor x(DType::Float, {1, 2, 0, 4});
  Tensor rois = Tensor::from_vector<float>({0, 0, 1, 1}, {1, 4});
  Tensor bi = Tensor::from_vector<int64_t>({0}, {1});
  Tensor y = test::run_op("RoiAlign", {x, rois, bi}, {Attribute::make_int("output_height", 2), Attribute::make_int("output_width", 2)});
  EXPECT_EQ(y.dims(), (Dims{1, 2, 2, 2}));
  EXPECT_EQ(test::values<float>(y), std::vector<float>(8, 0.0f));
}

// ---- 5. session build is linear -----------------------------------------------------------

TEST(HardeningBuild, HundredThousandNodeChainBuildsInUnderTwoSeconds) {
  Model m;
  m.opset_import = {{"", 17}};
  m.graph.inputs.push_back({"v0", Type::tensor(DType::Float, Shape::of({2})), ""});
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    Node nd;
    nd.op_type = i % 2 ? "Relu" : "Neg";
    nd.inputs = {"v" + std::to_string(i)};
    nd.outputs = {"v" + std::to_string(i + 1)};
    m.graph.nodes.push_back(std::move(nd));
  }
  m.graph.outputs.push_back({"v" + std::to_string(n), Type::tensor(DType::Float), ""});
  // CPU time of this process: the machine running the suite is shared, and wall time there
  // measures the other jobs (the quadratic build took minutes of CPU, not a slow second).
  auto cpu = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  auto t0 = std::chrono::steady_clock::now();
  double c0 = cpu();
  Session s(std::move(m), {.threads = 1});
  double secs = cpu() - c0;
  std::printf("session build of %d nodes: %.3f s CPU, %.3f s wall\n", n, secs,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
#ifdef T2O_ASAN
  const double limit = 20;  // instrumented builds are several times slower
#else
  const double limit = 2;
#endif
  EXPECT_LT(secs, limit);
  auto out = s.run({{"v0", Tensor::from_vector<float>({-1, 2}, {2})}});
  // Neg/Relu pairs: [-1, 2] -> [1, 0] after the first, [0, 0] from the second on.
  EXPECT_EQ(test::values<float>(out.at("v" + std::to_string(n)).tensor), (std::vector<float>{0, 0}));
}

// ---- 6. float -> int conversions ----------------------------------------------------------

TEST(HardeningUndefined, QuantizeMapsNaNToTheZeroPointAndSaturates) {
  Tensor x = Tensor::from_vector<float>({NAN, INFINITY, -INFINITY, 1e30f, 2.0f}, {5});
  Tensor y = test::run_op("QuantizeLinear", {x, Tensor::scalar<float>(1.0f), Tensor::scalar<uint8_t>(128)});
  EXPECT_EQ(test::values<uint8_t>(y), (std::vector<uint8_t>{128, 255, 0, 255, 130}));
  Tensor z = test::run_op("QuantizeLinear", {Tensor::from_vector<float>({1, 2}, {2}), Tensor::scalar<float>(0.0f),
                                             Tensor::scalar<int8_t>(-3)});
  EXPECT_EQ(test::values<int8_t>(z), (std::vector<int8_t>{127, 127}));
  Model m = test::one_node("DynamicQuantizeLinear", {{"x", Tensor::from_vector<float>({INFINITY, -INFINITY, 1}, {3})}}, {}, 3);
  EXPECT_NO_THROW(test::run(m, {{"x", Tensor::from_vector<float>({INFINITY, -INFINITY, 1}, {3})}}, false));
}

TEST(HardeningUndefined, GridSampleWithNaNOrHugeCoordinates) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor grid = Tensor::from_vector<float>({NAN, 0, 1e30f, -1e30f, 0, 0, INFINITY, 0}, {1, 1, 4, 2});
  for (const char* pad : {"zeros", "border", "reflection"})
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      Tensor y = test::run_op("GridSample", {x, grid},
                              {Attribute::make_string("padding_mode", pad), Attribute::make_string("mode", mode)});
      auto v = test::values<float>(y);
      std::string what = std::string(pad) + " " + mode;
      EXPECT_TRUE(std::isnan(v[0])) << what;
      EXPECT_TRUE(std::isfinite(v[1])) << what;
      EXPECT_TRUE(std::isnan(v[3])) << what;
      if (std::string(mode) == "bilinear") {
        EXPECT_NEAR(v[2], 2.5f, 1e-5) << what;  // the centre
      }
      if (std::string(pad) == "zeros") {
        EXPECT_EQ(v[1], 0.0f) << what;  // far outside
      }
    }
}

TEST(HardeningUndefined, RangeWithHugeOrNaNBounds) {
  auto range = [](float s, float l, float d) {
    return test::run_op("Range", {Tensor::scalar<float>(s), Tensor::scalar<float>(l), Tensor::scalar<float>(d)});
  };
  EXPECT_EQ(range(0, NAN, 1).numel(), 0);
  EXPECT_EQ(error_code([&] { range(0, 1e30f, 1); }), kExitBadInput);
  // The step after the last element overflows int32; the elements themselves are exact.
  Tensor y = test::run_op("Range", {Tensor::scalar<int32_t>(INT32_MAX - 2), Tensor::scalar<int32_t>(INT32_MAX),
                                    Tensor::scalar<int32_t>(1)});
  EXPECT_EQ(test::values<int32_t>(y), (std::vector<int32_t>{INT32_MAX - 2, INT32_MAX - 1}));
}

TEST(HardeningUndefined, TfIdfRejectsIndexesOutsideTheOutput) {
  std::vector<Attribute> attrs = {Attribute::make_string("mode", "TF"), Attribute::make_int("min_gram_length", 1),
                                  Attribute::make_int("max_gram_length", 1), Attribute::make_int("max_skip_count", 0),
                                  Attribute::make_ints("ngram_counts", {0}), Attribute::make_ints("ngram_indexes", {-5}),
                                  Attribute::make_ints("pool_int64s", {7})};
  EXPECT_NE(error_code([&] { test::run_op("TfIdfVectorizer", {Tensor::from_vector<int64_t>({7, 7}, {2})}, attrs); }), -1);
  attrs[5] = Attribute::make_ints("ngram_indexes", {0});
  EXPECT_NE(error_code([&] { test::run_op("TfIdfVectorizer", {Tensor::from_vector<float>({NAN, 7}, {2})}, attrs); }), -1);
  Tensor y = test::run_op("TfIdfVectorizer", {Tensor::from_vector<int64_t>({7, 3, 7}, {3})}, attrs);
  EXPECT_EQ(test::values<float>(y), (std::vector<float>{2}));
}

TEST(HardeningUndefined, AsIntOfNaNAndHugeFloatsIsDefined) {
  Tensor t = Tensor::from_vector<float>({NAN, 1e30f, -1e30f, 3.7f}, {4});
  EXPECT_EQ(t.as_int(0), 0);
  EXPECT_EQ(t.as_int(1), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(t.as_int(2), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(t.as_int(3), 3);
}

// ---- 8. crashes inside the onnx library are contained -------------------------------------

TEST(HardeningDependencies, OnnxShapeInferenceCrashesBecomeInputErrors) {
  // onnx 1.12 dereferences past the shape: a scalar STFT signal, LayerNormalization axis < -rank.
  Model stft;
  stft.opset_import = {{"", 17}};
  stft.graph.name = "g";
  stft.graph.inputs.push_back({"s", Type::tensor(DType::Float, Shape::of({})), ""});
  stft.graph.initializers.push_back({"step", Tensor::scalar<int64_t>(8), ""});
  stft.graph.initializers.push_back({"len", Tensor::scalar<int64_t>(16), ""});
  Node n;
  n.op_type = "STFT";
  n.inputs = {"s", "step", "", "len"};
  n.outputs = {"y"};
  stft.graph.nodes.push_back(n);
  stft.graph.outputs.push_back({"y", Type::tensor(DType::Float, Shape::of({1, 1, 1, 2})), ""});
  std::string msg;
  EXPECT_EQ(error_code([&] { check_model(stft); }, &msg), kExitBadInput);
  EXPECT_NE(msg.find("onnx"), std::string::npos) << msg;

  Model ln;
  ln.opset_import = {{"", 17}};
  ln.graph.name = "g";
  ln.graph.inputs.push_back({"x", Type::tensor(DType::Float, Shape::of({2, 2, 2})), ""});
  ln.graph.initializers.push_back({"sc", Tensor::from_vector<float>({1, 1}, {2}), ""});
  Node l;
  l.op_type = "LayerNormalization";
  l.inputs = {"x", "sc"};
  l.outputs = {"y", "mean", "rstd"};
  l.attributes = {Attribute::make_int("axis", -4)};
  ln.graph.nodes.push_back(l);
  for (const char* o : {"y", "mean", "rstd"}) ln.graph.outputs.push_back({o, Type::tensor(DType::Float, Shape::of({1})), ""});
  EXPECT_EQ(error_code([&] { check_model(ln); }), kExitBadInput);
  EXPECT_EQ(error_code([&] { infer_shapes(ln, true); }), kExitBadInput);
}

TEST(HardeningDependencies, ContainedShapeInferenceKeepsWeightsAndAddsTypes) {
  Model m;
  m.opset_import = {{"", 17}};
  m.graph.inputs.push_back({"x", Type::tensor(DType::Float, Shape::of({4, 4096})), ""});
  Tensor w(DType::Float, {4096, 8});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = static_cast<float>(i % 7);
  m.graph.initializers.push_back({"w", w, ""});
  Node mm;
  mm.op_type = "MatMul";
  mm.inputs = {"x", "w"};
  mm.outputs = {"h"};
  Node r;
  r.op_type = "Relu";
  r.inputs = {"h"};
  r.outputs = {"y"};
  m.graph.nodes = {mm, r};
  m.graph.outputs.push_back({"y", Type::tensor(DType::Float), ""});
  Model out = infer_shapes(m, true);
  ASSERT_EQ(out.graph.initializers.size(), 1u);
  EXPECT_TRUE(out.graph.initializers[0].tensor.equals(w));
  ASSERT_EQ(out.graph.value_info.size(), 1u);
  EXPECT_EQ(out.graph.value_info[0].name, "h");
  ASSERT_TRUE(out.graph.outputs[0].type.shape.has_value());
  EXPECT_EQ(out.graph.outputs[0].type.shape->dims.size(), 2u);
}
