// Tensor and model I/O: .npy, .pb, external data, atomic writes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "onnx/check.h"
#include "onnx/model_io.h"
#include "onnx/tensor_io.h"

namespace fs = std::filesystem;
using namespace t2o;

namespace {
fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("t2o_io_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

Model linear_model(int64_t n, int64_t k) {
  Model m;
  m.opset_import = {{"", 17}};
  m.producer_name = "test";
  m.metadata_props = {{"author", "t2o"}};
  Graph& g = m.graph;
  g.name = "linear";
  g.inputs.push_back({"x", Type::tensor(DType::Float, Shape{{Dim::named("batch"), Dim::fixed(k)}}), ""});
  g.outputs.push_back({"y", Type::tensor(DType::Float, Shape{{Dim::named("batch"), Dim::fixed(n)}}), ""});
  Tensor w(DType::Float, {k, n});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = static_cast<float>(i % 13) * 0.5f;
  g.initializers.push_back({"w", w, "weights"});
  Node mm;
  mm.op_type = "MatMul";
  mm.name = "mm";
  mm.inputs = {"x", "w"};
  mm.outputs = {"y"};
  g.nodes.push_back(mm);
  return m;
}
}  // namespace

TEST(TensorIo, NpyRoundTripAllTypes) {
  fs::path d = temp_dir();
  for (DType t : {DType::Float, DType::Double, DType::Float16, DType::Int8, DType::Int16, DType::Int32,
                  DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64, DType::Bool}) {
    Tensor x(t, {2, 3, 4});
    auto* p = static_cast<unsigned char*>(x.raw());
    for (size_t i = 0; i < x.nbytes(); ++i) p[i] = static_cast<unsigned char>(t == DType::Bool ? i % 2 : i * 7);
    write_npy((d / "x.npy").string(), x);
    Tensor y = read_npy((d / "x.npy").string());
    EXPECT_TRUE(x.equals(y)) << dtype_name(t);
  }
  Tensor s = Tensor::scalar<float>(3.5f);
  write_npy((d / "s.npy").string(), s);
  EXPECT_TRUE(read_npy((d / "s.npy").string()).equals(s));
  fs::remove_all(d);
}

TEST(TensorIo, PbRoundTripIncludingStrings) {
  fs::path d = temp_dir();
  Tensor x = Tensor::from_vector<int64_t>({1, -2, 3}, {3});
  write_tensor_pb((d / "x.pb").string(), x, "x");
  std::string name;
  EXPECT_TRUE(read_tensor_pb((d / "x.pb").string(), &name).equals(x));
  EXPECT_EQ(name, "x");
  Tensor s = Tensor::from_strings({"a", "bc", ""}, {3});
  write_tensor_pb((d / "s.pb").string(), s);
  EXPECT_TRUE(read_tensor_pb((d / "s.pb").string()).equals(s));
  fs::remove_all(d);
}

TEST(TensorIo, BadNpyIsAnInputError) {
  fs::path d = temp_dir();
  std::ofstream(d / "bad.npy") << "not numpy";
  EXPECT_THROW(read_npy((d / "bad.npy").string()), InputError);
  EXPECT_THROW(read_npy((d / "missing.npy").string()), InputError);
  fs::remove_all(d);
}

TEST(ModelIo, ExternalDataRoundTrip) {
  fs::path d = temp_dir();
  Model m = linear_model(64, 32);
  SaveOptions o;
  o.external = SaveOptions::External::Always;
  save_model(m, (d / "m.onnx").string(), o);
  EXPECT_TRUE(fs::exists(d / "m.onnx.data"));
  EXPECT_LT(fs::file_size(d / "m.onnx"), 1024u) << "weights should live in the data file";
  Model back = load_model((d / "m.onnx").string());
  std::string why;
  EXPECT_TRUE(equal(m, back, &why)) << why;
  EXPECT_NO_THROW(check_model_file((d / "m.onnx").string()));
  // A missing data file is reported, not crashed on.
  fs::remove(d / "m.onnx.data");
  EXPECT_THROW(load_model((d / "m.onnx").string()), InputError);
  fs::remove_all(d);
}

TEST(ModelIo, AtomicWriteKeepsOldFileOnFailure) {
  fs::path d = temp_dir();
  std::string p = (d / "m.onnx").string();
  write_file_atomic(p, "first");
  EXPECT_THROW(write_file_atomic((d / "no_such_dir" / "m.onnx").string(), "x"), Error);
  std::ifstream in(p);
  std::string s;
  in >> s;
  EXPECT_EQ(s, "first");
  // No temp files left behind.
  int files = 0;
  for (auto& e : fs::directory_iterator(d)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  fs::remove_all(d);
}

TEST(ModelIo, SymbolicDimsAndMetadataSurvive) {
  Model m = linear_model(4, 3);
  Model back = load_model_from_bytes(save_model_to_bytes(m));
  ASSERT_TRUE(back.graph.inputs[0].type.shape);
  EXPECT_EQ(back.graph.inputs[0].type.shape->dims[0].symbol, "batch");
  EXPECT_EQ(back.metadata_props.at(0).second, "t2o");
  EXPECT_EQ(back.graph.initializers[0].doc_string, "weights");
}

// Models whose weights exceed protobuf's 2 GB limit are saved with external data automatically.
TEST(ModelIo, OverTwoGigabytesUsesExternalData) {
  fs::path d = temp_dir();
  Model m = linear_model(1, 1);
  Tensor big(DType::Float, {int64_t{550} * 1024 * 1024});  // 2.2 GB
  big.data<float>()[big.numel() - 1] = 42.0f;
  m.graph.initializers.push_back({"big", big, ""});
  save_model(m, (d / "big.onnx").string());
  EXPECT_TRUE(fs::exists(d / "big.onnx.data"));
  Model back = load_model((d / "big.onnx").string());
  ASSERT_EQ(back.graph.initializers.size(), 2u);
  const Tensor& b = back.graph.initializers[1].tensor;
  EXPECT_EQ(b.numel(), big.numel());
  EXPECT_EQ(b.data<float>()[b.numel() - 1], 42.0f);
  fs::remove_all(d);
}

// The converter's doc_string of a node: "SOURCE ATEN_OP[ in MODULE]", each part optional but the op.
TEST(NodeOrigin, FormatAndParse) {
  for (const NodeOrigin& o : {NodeOrigin{"resnet.py:148", "aten::relu_", "layer3.1.relu"},
                              NodeOrigin{"model.py:7", "aten::add", ""}, NodeOrigin{"", "aten::mul", ""},
                              NodeOrigin{"", "aten::mul", "blocks.0"}}) {
    std::string doc = node_origin_doc(o);
    NodeOrigin back = parse_node_origin(doc);
    EXPECT_EQ(back.source, o.source) << doc;
    EXPECT_EQ(back.aten_op, o.aten_op) << doc;
    EXPECT_EQ(back.module, o.module) << doc;
  }
  EXPECT_EQ(node_origin_doc({"resnet.py:148", "aten::relu_", "layer3.1.relu"}), "resnet.py:148 aten::relu_ in layer3.1.relu");
  // A source that holds spaces (a file name with one) still leaves the op and module apart.
  NodeOrigin spaced = parse_node_origin("my model.py:3 aten::add in a.b");
  EXPECT_EQ(spaced.source, "my model.py:3");
  EXPECT_EQ(spaced.aten_op, "aten::add");
  EXPECT_EQ(spaced.module, "a.b");
}
