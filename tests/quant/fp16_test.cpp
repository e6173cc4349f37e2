// t2o_quant --mode fp16: which ops run in float16, where the Casts go, weights, graph inputs and
// outputs, subgraphs, --exclude, clamping, every op of the allow list on our runtime, the accuracy
// report for float16 inputs, the command line, and (when installed) ONNX Runtime.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "onnx/check.h"
#include "onnx/model_io.h"
#include "onnx/tensor_io.h"
#include "passes/graph_util.h"
#include "quant/quant.h"
#include "quant_models.h"
#include "shell_support.h"

namespace fs = std::filesystem;
using namespace t2o;
using namespace t2o::test;

namespace {

Tensor cast_to(const Tensor& t, DType to) {
  if (t.dtype() == to || !dtype_is_float(t.dtype())) return t;
  Tensor c(to, t.dims());
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = static_cast<float>(t.as_double(i));
    if (to == DType::Float16) c.data<Half>()[i] = Half(v);
    else c.data<float>()[i] = v;
  }
  return c;
}

// Feeds for `m` from float32 values: each input as the model declares it.
std::map<std::string, RValue> feeds_for(const Model& m, const std::map<std::string, Tensor>& values) {
  std::map<std::string, RValue> f;
  for (const auto& [name, t] : values) {
    const ValueInfo* vi = m.graph.find_input(name);
    f[name] = vi ? cast_to(t, vi->type.elem) : t;
  }
  return f;
}

std::map<std::string, RValue> run_model(const Model& m, const std::map<std::string, Tensor>& values, bool fast = true) {
  SessionOptions so;
  so.threads = 1;
  so.fast_paths = fast;
  Session s(m, so);
  return s.run(feeds_for(m, values));
}

// Every output of q is within rel * (largest |float output|) + 1e-3 of the float model's, on the
// fast paths and on the reference kernels.
void expect_close_to_float(const Model& f, const Model& q, const std::map<std::string, Tensor>& values,
                           double rel = 1e-2) {
  auto want = run_model(f, values, false);
  for (bool fast : {true, false}) {
    SCOPED_TRACE(fast ? "fast paths" : "reference kernels");
    auto got = run_model(q, values, fast);
    for (const ValueInfo& o : f.graph.outputs) {
      const Tensor& w = want.at(o.name).tensor;
      const Tensor& g = got.at(o.name).tensor;
      ASSERT_EQ(w.dims(), g.dims()) << o.name;
      double scale = 0;
      for (int64_t i = 0; i < w.numel(); ++i)
        if (std::isfinite(w.as_double(i))) scale = std::max(scale, std::fabs(w.as_double(i)));
      for (int64_t i = 0; i < w.numel(); ++i) {
        double a = w.as_double(i), b = g.as_double(i);
        if (std::isnan(a) && std::isnan(b)) continue;
        if (std::isinf(a)) {
          ASSERT_EQ(a, b) << o.name << " at " << i;
          continue;
        }
        ASSERT_NEAR(a, b, rel * scale + 1e-3) << o.name << " at " << i;
      }
    }
  }
}

std::map<std::string, Tensor> inputs_of(const Model& f, uint64_t seed) { return generate_input_sets(f, 1, seed)[0]; }

// Converts a copy to fp16 and checks what every result must be: valid ONNX, runnable, close.
Model fp16(const Model& f, QuantizeOptions o = {}, QuantizeResult* out = nullptr) {
  o.mode = QuantMode::Float16;
  Model q = passes::deep_copy(f);
  QuantizeResult r = quantize(q, o);
  EXPECT_NO_THROW(check_model(q));
  if (out) *out = r;
  return q;
}

// Element types of every value of the main graph, from strict shape inference.
std::map<std::string, DType> types_of(const Model& q) {
  Model m = infer_shapes(q, true);
  std::map<std::string, DType> t;
  for (const auto* list : {&m.graph.inputs, &m.graph.outputs, &m.graph.value_info})
    for (const ValueInfo& v : *list) t[v.name] = v.type.elem;
  for (const Initializer& i : m.graph.initializers) t[i.name] = i.tensor.dtype();
  return t;
}

std::vector<const Node*> nodes_of(const Model& m, const std::string& op) {
  std::vector<const Node*> r;
  for (const Node& n : m.graph.nodes)
    if (n.op_type == op) r.push_back(&n);
  return r;
}

const Node* producer(const Model& m, const std::string& v) {
  for (const Node& n : m.graph.nodes)
    for (const std::string& o : n.outputs)
      if (o == v) return &n;
  return nullptr;
}

DType weight_type(const Model& m, const Node& n, int slot = 1) {
  const Initializer* i = m.graph.find_initializer(n.inputs[static_cast<size_t>(slot)]);
  return i ? i->tensor.dtype() : DType::Undefined;
}

// x[1, 3, 16, 16] -> Conv 8x3x3x3 (pad 1) -> BatchNormalization -> Relu -> MaxPool 2x2 -> Conv 16x8x3x3
//   -> Relu -> GlobalAveragePool -> Flatten -> Gemm (transB, 10x16) -> logits[1, 10]
Model bn_cnn(int64_t opset = 17) {
  std::mt19937 g(3);
  ModelBuilder b(opset);
  b.input("x", {1, 3, 16, 16});
  b.init("w1", random_normal(g, {8, 3, 3, 3}, 0.3f)).init("b1", random_normal(g, {8}, 0.1f));
  b.init("scale", random_uniform(g, {8}, 0.5f, 1.5f)).init("shift", random_normal(g, {8}, 0.1f));
  b.init("mean", random_normal(g, {8}, 0.1f)).init("var", random_uniform(g, {8}, 0.5f, 2.0f));
  b.init("w2", random_normal(g, {16, 8, 3, 3}, 0.15f)).init("b2", random_normal(g, {16}, 0.1f));
  b.init("w3", random_normal(g, {10, 16}, 0.3f)).init("b3", random_normal(g, {10}, 0.1f));
  b.node("Conv", {"x", "w1", "b1"}, {"c1"}, {Attribute::make_ints("pads", {1, 1, 1, 1})}, "conv1");
  b.node("BatchNormalization", {"c1", "scale", "shift", "mean", "var"}, {"n1"}, {}, "bn1");
  b.node("Relu", {"n1"}, {"r1"}, {}, "relu1");
  b.node("MaxPool", {"r1"}, {"p1"},
         {Attribute::make_ints("kernel_shape", {2, 2}), Attribute::make_ints("strides", {2, 2})}, "pool1");
  b.node("Conv", {"p1", "w2", "b2"}, {"c2"}, {Attribute::make_ints("pads", {1, 1, 1, 1})}, "conv2");
  b.node("Relu", {"c2"}, {"r2"}, {}, "relu2");
  b.node("GlobalAveragePool", {"r2"}, {"gp"}, {}, "gap").node("Flatten", {"gp"}, {"fl"}, {}, "flatten");
  b.node("Gemm", {"fl", "w3", "b3"}, {"logits"}, {Attribute::make_int("transB", 1)}, "fc");
  b.output("logits", {1, 10});
  return b.m;
}

// A pre-norm transformer block at opset 17: LayerNormalization -> single-head attention (Softmax)
// -> residual -> LayerNormalization -> MLP with the erf GELU -> residual. x, y [2, 8, 32].
Model transformer() {
  std::mt19937 g(5);
  ModelBuilder b(17);
  const int64_t d = 32, ff = 64;
  b.input("x", {2, 8, d});
  for (std::string n : {"ln1", "ln2"})
    b.init(n + "_g", random_uniform(g, {d}, 0.8f, 1.2f)).init(n + "_b", random_normal(g, {d}, 0.1f));
  for (const char* n : {"wq", "wk", "wv", "wo"}) b.init(n, random_normal(g, {d, d}, 0.18f));
  b.init("w1", random_normal(g, {d, ff}, 0.18f)).init("b1", random_normal(g, {ff}, 0.1f));
  b.init("w2", random_normal(g, {ff, d}, 0.12f)).init("b2", random_normal(g, {d}, 0.1f));
  b.init("sqrt_d", Tensor::scalar<float>(std::sqrt(static_cast<float>(d))));
  b.init("sqrt2", Tensor::scalar<float>(std::sqrt(2.0f))).init("one", Tensor::scalar<float>(1.0f));
  b.init("half", Tensor::scalar<float>(0.5f));
  Attribute last = Attribute::make_int("axis", -1);
  b.node("LayerNormalization", {"x", "ln1_g", "ln1_b"}, {"n1"}, {last}, "ln1");
  b.node("MatMul", {"n1", "wq"}, {"q"}, {}, "q").node("MatMul", {"n1", "wk"}, {"k"}, {}, "k");
  b.node("MatMul", {"n1", "wv"}, {"v"}, {}, "v");
  b.node("Transpose", {"k"}, {"kt"}, {Attribute::make_ints("perm", {0, 2, 1})}, "kt");
  b.node("MatMul", {"q", "kt"}, {"s"}, {}, "scores").node("Div", {"s", "sqrt_d"}, {"sd"}, {}, "scale");
  b.node("Softmax", {"sd"}, {"p"}, {last}, "softmax").node("MatMul", {"p", "v"}, {"a"}, {}, "attend");
  b.node("MatMul", {"a", "wo"}, {"o"}, {}, "out_proj").node("Add", {"x", "o"}, {"r1"}, {}, "residual1");
  b.node("LayerNormalization", {"r1", "ln2_g", "ln2_b"}, {"n2"}, {last}, "ln2");
  b.node("MatMul", {"n2", "w1"}, {"h"}, {}, "fc1").node("Add", {"h", "b1"}, {"hb"}, {}, "fc1_bias");
  b.node("Div", {"hb", "sqrt2"}, {"hd"}, {}, "gelu_div").node("Erf", {"hd"}, {"e"}, {}, "gelu_erf");
  b.node("Add", {"e", "one"}, {"e1"}, {}, "gelu_add").node("Mul", {"hb", "e1"}, {"gm"}, {}, "gelu_mul");
  b.node("Mul", {"gm", "half"}, {"gelu"}, {}, "gelu_half");
  b.node("MatMul", {"gelu", "w2"}, {"f"}, {}, "fc2").node("Add", {"f", "b2"}, {"fb"}, {}, "fc2_bias");
  b.node("Add", {"r1", "fb"}, {"y"}, {}, "residual2");
  b.output("y", {2, 8, d});
  return b.m;
}

int64_t float32_initializer_bytes(const Model& m) {
  int64_t n = 0;
  for (const Initializer& i : m.graph.initializers)
    if (i.tensor.dtype() == DType::Float) n += static_cast<int64_t>(i.tensor.nbytes());
  return n;
}

TEST(Fp16, CnnRunsInFloat16WithCastsAtTheEdges) {
  Model f = bn_cnn();
  QuantizeResult r;
  Model q = fp16(f, {}, &r);
  // Everything: Conv x2, BatchNormalization, Relu x2, MaxPool, GlobalAveragePool, Flatten, Gemm.
  EXPECT_EQ(r.quantized, 9);
  EXPECT_EQ(r.by_op["Conv"], 2);
  EXPECT_EQ(r.by_op["BatchNormalization"], 1);
  EXPECT_EQ(r.by_op["Gemm"], 1);
  EXPECT_TRUE(r.skipped.empty());
  EXPECT_EQ(q.graph.inputs[0].type.elem, DType::Float);
  EXPECT_EQ(q.graph.outputs[0].type.elem, DType::Float);
  // One Cast after the input, one before the output.
  ASSERT_EQ(count_op(q, "Cast"), 2);
  EXPECT_EQ(q.graph.nodes.front().op_type, "Cast");
  EXPECT_EQ(producer(q, "logits")->op_type, "Cast");
  // Weights keep their names and become float16: about half the bytes, none float32 left.
  for (const Node* n : nodes_of(q, "Conv")) EXPECT_EQ(weight_type(q, *n), DType::Float16) << n->name;
  EXPECT_EQ(weight_type(q, *nodes_of(q, "Gemm")[0]), DType::Float16);
  EXPECT_EQ(q.graph.find_initializer("w1")->tensor.dtype(), DType::Float16);
  EXPECT_EQ(q.graph.find_initializer("var")->tensor.dtype(), DType::Float16);
  EXPECT_EQ(float32_initializer_bytes(q), 0);
  EXPECT_NEAR(static_cast<double>(r.initializer_bytes_after) / static_cast<double>(r.initializer_bytes_before), 0.5,
              0.01);
  expect_close_to_float(f, q, inputs_of(f, 1));
}

TEST(Fp16, TransformerKeepsSoftmaxAndLayerNormInFloat32) {
  // With value_info for every intermediate, as converted models have: retyped values must not
  // keep stale float32 entries (the checker's strict inference would refuse them).
  Model f = infer_shapes(transformer());
  ASSERT_GT(f.graph.value_info.size(), 20u);
  QuantizeResult r;
  Model q = fp16(f, {}, &r);
  // MatMul x8, Transpose, Div x2, Add x5, Erf, Mul x2.
  EXPECT_EQ(r.quantized, 19);
  EXPECT_EQ(r.by_op["MatMul"], 8);
  EXPECT_EQ(r.by_op["Add"], 5);
  EXPECT_EQ(r.by_op["Erf"], 1);
  EXPECT_EQ(r.by_op.count("Softmax") + r.by_op.count("LayerNormalization"), 0u);
  auto t = types_of(q);
  for (const char* op : {"Softmax", "LayerNormalization"})
    for (const Node* n : nodes_of(q, op)) {
      for (const std::string& x : n->inputs) EXPECT_EQ(t.at(x), DType::Float) << n->name << " reads " << x;
      EXPECT_EQ(t.at(n->outputs[0]), DType::Float) << n->name;
    }
  for (const Node* n : nodes_of(q, "MatMul")) {
    EXPECT_EQ(t.at(n->inputs[0]), DType::Float16) << n->name;
    EXPECT_EQ(t.at(n->outputs[0]), DType::Float16) << n->name;
  }
  for (const char* w : {"wq", "wk", "wv", "wo", "w1", "w2", "b1", "b2"})
    EXPECT_EQ(q.graph.find_initializer(w)->tensor.dtype(), DType::Float16) << w;
  for (const char* w : {"ln1_g", "ln1_b", "ln2_g", "ln2_b"})
    EXPECT_EQ(q.graph.find_initializer(w)->tensor.dtype(), DType::Float) << w;
  // One Cast per value and direction, shared by its readers: x and n1 (read by three MatMuls) to
  // float16, sd to float32 for Softmax and p back, r1 to float32 for ln2, n2 back, y at the output.
  EXPECT_EQ(count_op(q, "Cast"), 7);
  EXPECT_EQ(q.graph.outputs[0].type.elem, DType::Float);
  expect_close_to_float(f, q, inputs_of(f, 2));
}

TEST(Fp16, ResizeScalesAndRoiStayFloat32) {
  std::mt19937 g(9);
  ModelBuilder b(17);
  b.input("x", {1, 3, 10, 10});
  b.init("w1", random_normal(g, {4, 3, 3, 3}, 0.3f)).init("w2", random_normal(g, {2, 4, 3, 3}, 0.3f));
  b.init("roi", Tensor::from_vector<float>({0, 0, 0, 0, 1, 1, 1, 1}, {8}));
  // 1.3 is not a float16 value: rounded to 1.2998, the output size floor(10 * s) would be 12, not 13.
  b.init("head", Tensor::from_vector<float>({1.0f, 1.0f}, {2}));
  b.init("tail", Tensor::from_vector<float>({1.3f, 1.3f}, {2}));
  Attribute pads = Attribute::make_ints("pads", {1, 1, 1, 1});
  b.node("Conv", {"x", "w1"}, {"c"}, {pads}, "conv1");
  // Followers of constants only are float16 candidates on their own: their readers decide.
  b.node("Identity", {"head"}, {"h"}, {}, "head_copy");
  b.node("Concat", {"h", "tail"}, {"s"}, {Attribute::make_int("axis", 0)}, "scales");
  b.node("Resize", {"c", "roi", "s"}, {"up"}, {Attribute::make_string("mode", "linear")}, "resize");
  b.node("Conv", {"up", "w2"}, {"y"}, {pads}, "conv2");
  b.output("y", {1, 2, 13, 13});
  Model f = b.m;
  QuantizeResult r;
  Model q = fp16(f, {}, &r);
  EXPECT_EQ(r.quantized, 2);
  EXPECT_EQ(r.by_op["Conv"], 2);
  for (const char* c : {"head", "tail", "roi"})
    EXPECT_EQ(q.graph.find_initializer(c)->tensor.dtype(), DType::Float) << c;
  auto t = types_of(q);
  const Node* resize = nodes_of(q, "Resize")[0];
  for (const std::string& x : resize->inputs) EXPECT_EQ(t.at(x), DType::Float) << x;
  EXPECT_EQ(producer(q, resize->inputs[0])->op_type, "Cast");
  expect_close_to_float(f, q, inputs_of(f, 3));
}

// x[4, 16] -> MatMul w -> h; If(cond) then: Mul(h, h) else: h itself; -> MatMul w2 -> y.
Model if_model() {
  std::mt19937 g(13);
  ModelBuilder b(17);
  b.input("x", {4, 16}).input("cond", {}, DType::Bool);
  b.init("w", random_normal(g, {16, 8}, 0.25f)).init("w2", random_normal(g, {8, 4}, 0.3f));
  b.node("MatMul", {"x", "w"}, {"h"}, {}, "fc1");
  auto then_branch = std::make_shared<Graph>();
  then_branch->name = "then";
  then_branch->nodes.push_back(passes::make_node("Mul", {"h", "h"}, {"sq"}, "square"));
  then_branch->outputs.push_back({"sq", Type::tensor(DType::Float), {}});
  auto else_branch = std::make_shared<Graph>();
  else_branch->name = "else";
  else_branch->outputs.push_back({"h", Type::tensor(DType::Float), {}});  // the outer value itself
  b.node("If", {"cond"}, {"b"},
         {Attribute::make_graph("then_branch", then_branch), Attribute::make_graph("else_branch", else_branch)},
         "branch");
  b.node("MatMul", {"b", "w2"}, {"y"}, {}, "fc2");
  b.output("y", {4, 4});
  return b.m;
}

TEST(Fp16, IfSubgraphReadsTheOuterValueAsFloat32) {
  Model f = if_model();
  for (bool keep_io : {true, false}) {
    SCOPED_TRACE(keep_io ? "keep_io_float32" : "--fp16-io");
    QuantizeOptions o;
    o.keep_io_float32 = keep_io;
    QuantizeResult r;
    Model q = fp16(f, o, &r);
    EXPECT_EQ(r.quantized, 2);
    EXPECT_EQ(r.by_op["MatMul"], 2);
    const Node* branch = nodes_of(q, "If")[0];
    // The subgraphs are untouched: they still read h, which a Cast back to float32 produces.
    const Graph& then_g = *branch->attr_graph("then_branch");
    ASSERT_EQ(then_g.nodes.size(), 1u);
    EXPECT_EQ(then_g.nodes[0].inputs, (std::vector<std::string>{"h", "h"}));
    EXPECT_EQ(branch->attr_graph("else_branch")->outputs[0].name, "h");
    const Node* h = producer(q, "h");
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->op_type, "Cast");
    EXPECT_EQ(h->attr_int("to"), static_cast<int64_t>(DType::Float));
    EXPECT_EQ(q.graph.outputs[0].type.elem, keep_io ? DType::Float : DType::Float16);
    EXPECT_EQ(q.graph.find_input("x")->type.elem, keep_io ? DType::Float : DType::Float16);
    EXPECT_EQ(q.graph.find_input("cond")->type.elem, DType::Bool);
    std::mt19937 g(1);
    for (bool c : {true, false}) {
      Tensor cond(DType::Bool, {});
      cond.data<bool>()[0] = c;
      expect_close_to_float(f, q, {{"x", random_normal(g, {4, 16})}, {"cond", cond}});
    }
  }
}

TEST(Fp16, Fp16IoMakesInputsAndOutputsFloat16) {
  QuantizeOptions o;
  o.keep_io_float32 = false;
  {
    Model f = bn_cnn();
    QuantizeResult r;
    Model q = fp16(f, o, &r);
    EXPECT_EQ(r.quantized, 9);
    EXPECT_EQ(q.graph.inputs[0].type.elem, DType::Float16);
    EXPECT_EQ(q.graph.outputs[0].type.elem, DType::Float16);
    EXPECT_EQ(count_op(q, "Cast"), 0) << "the whole model runs in float16";
    EXPECT_EQ(nodes_of(q, "Conv")[0]->inputs[0], "x");
    EXPECT_EQ(producer(q, "logits")->op_type, "Gemm");
    auto values = inputs_of(f, 4);
    expect_close_to_float(f, q, values);
    Tensor y = run_model(q, values).at("logits").tensor;
    EXPECT_EQ(y.dtype(), DType::Float16);
    // The accuracy report feeds the float16 model float16 inputs and reads float16 outputs.
    AccuracyReport a = compare_accuracy(f, q, generate_input_sets(f, 3, 7), 1);
    ASSERT_EQ(a.outputs.size(), 1u);
    EXPECT_GT(a.outputs[0].cosine, 0.9999);
    EXPECT_GT(a.outputs[0].max_abs, 0);
    EXPECT_GT(a.quant_ms, 0);
  }
  {
    // LayerNormalization reads x first: the input gets one Cast to float32, the residual Add
    // reads it as it comes; the output is the last Add's own float16 result.
    Model f = infer_shapes(transformer());
    Model q = fp16(f, o);
    EXPECT_EQ(q.graph.inputs[0].type.elem, DType::Float16);
    EXPECT_EQ(q.graph.outputs[0].type.elem, DType::Float16);
    EXPECT_EQ(count_op(q, "Cast"), 6);
    EXPECT_EQ(producer(q, "y")->op_type, "Add");
    EXPECT_EQ(producer(q, nodes_of(q, "LayerNormalization")[0]->inputs[0])->op_type, "Cast");
    expect_close_to_float(f, q, inputs_of(f, 5));
  }
  {
    // An output computed in float32 (Softmax) gets a Cast to float16 under its own name; an input
    // passed straight through stays the (now float16) input; a weight that is also an output is
    // stored once, in float16, under its name.
    std::mt19937 g(2);
    ModelBuilder b(17);
    b.input("x", {3, 8}).init("w", random_normal(g, {8, 5}));
    b.node("MatMul", {"x", "w"}, {"h"}, {}, "fc").node("Softmax", {"h"}, {"p"}, {}, "softmax");
    b.output("p", {3, 5}).output("x", {3, 8}).output("w", {8, 5});
    Model f = b.m;
    Model q = fp16(f, o);
    for (const ValueInfo& out : q.graph.outputs) EXPECT_EQ(out.type.elem, DType::Float16) << out.name;
    ASSERT_EQ(q.graph.initializers.size(), 1u);
    EXPECT_EQ(q.graph.initializers[0].name, "w");
    EXPECT_EQ(q.graph.initializers[0].tensor.dtype(), DType::Float16);
    EXPECT_EQ(nodes_of(q, "MatMul")[0]->inputs, (std::vector<std::string>{"x", "w"}));
    const Node* p = producer(q, "p");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->op_type, "Cast");
    EXPECT_EQ(p->attr_int("to"), static_cast<int64_t>(DType::Float16));
    EXPECT_EQ(producer(q, p->inputs[0])->op_type, "Softmax");
    expect_close_to_float(f, q, inputs_of(f, 6));
  }
}

TEST(Fp16, EmbeddingTablesAndConstantNodes) {
  // ids[2, 5] -> Gather(embedding [50, 16]) -> Add(positions) -> LayerNormalization(gamma = k)
  //   -> MatMul(w) -> Add(k) -> Mul(two) -> y. k is a Constant node read by the float32
  // LayerNormalization and a float16 Add; two (value_float) only by a float16 Mul.
  std::mt19937 g(17);
  ModelBuilder b(17);
  b.input("ids", {2, 5}, DType::Int64);
  b.init("embedding", random_normal(g, {50, 16})).init("positions", random_normal(g, {5, 16}, 0.1f));
  b.init("beta", random_normal(g, {16}, 0.1f)).init("w", random_normal(g, {16, 16}, 0.25f));
  b.node("Constant", {}, {"k"}, {Attribute::make_tensor("value", random_uniform(g, {16}, 0.8f, 1.2f))}, "k");
  b.node("Constant", {}, {"two"}, {Attribute::make_float("value_float", 2.0f)}, "two");
  b.node("Gather", {"embedding", "ids"}, {"e"}, {}, "embed").node("Add", {"e", "positions"}, {"ep"}, {}, "add_pos");
  b.node("LayerNormalization", {"ep", "k", "beta"}, {"n"}, {Attribute::make_int("axis", -1)}, "ln");
  b.node("MatMul", {"n", "w"}, {"h"}, {}, "fc").node("Add", {"h", "k"}, {"hk"}, {}, "add_k");
  b.node("Mul", {"hk", "two"}, {"y"}, {}, "double");
  b.output("y", {2, 5, 16});
  Model f = b.m;
  QuantizeResult r;
  Model q = fp16(f, {}, &r);
  EXPECT_EQ(r.quantized, 5);
  EXPECT_EQ(r.by_op["Gather"], 1);
  EXPECT_EQ(r.by_op["Add"], 2);
  EXPECT_EQ(q.graph.find_initializer("embedding")->tensor.dtype(), DType::Float16);
  EXPECT_EQ(q.graph.find_initializer("positions")->tensor.dtype(), DType::Float16);
  auto t = types_of(q);
  const Node* ln = nodes_of(q, "LayerNormalization")[0];
  EXPECT_EQ(ln->inputs[1], "k");
  EXPECT_EQ(t.at("k"), DType::Float) << "the float32 reader keeps the Constant";
  const Node* add_k = nodes_of(q, "Add")[1];
  EXPECT_EQ(t.at(add_k->inputs[1]), DType::Float16);
  EXPECT_NE(add_k->inputs[1], "k");
  const Node* two = producer(q, "two");
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->op_type, "Constant");
  EXPECT_EQ(t.at("two"), DType::Float16) << "read by float16 nodes alone: converted in place";
  expect_close_to_float(f, q, inputs_of(f, 12));
}

TEST(Fp16, ShapeReadsTheFloat16ValueWithoutACast) {
  // x[3, 8] -> MatMul -> h -> Shape -> Reshape of x to h's shape -> Relu. Shape needs no float32.
  std::mt19937 g(6);
  ModelBuilder b(17);
  b.input("x", {3, 8}).init("w", random_normal(g, {8, 8}, 0.3f));
  b.node("MatMul", {"x", "w"}, {"h"}, {}, "fc").node("Shape", {"h"}, {"shape"}, {}, "shape_of_h");
  b.node("Reshape", {"h", "shape"}, {"r"}, {}, "reshape").node("Relu", {"r"}, {"y"}, {}, "relu");
  b.output("y", {3, 8}).output("shape", {2}, DType::Int64);
  Model f = b.m;
  QuantizeResult r;
  Model q = fp16(f, {}, &r);
  EXPECT_EQ(r.quantized, 3);
  EXPECT_EQ(count_op(q, "Cast"), 2) << "x to float16 and y back";
  const Node* shape = nodes_of(q, "Shape")[0];
  EXPECT_EQ(types_of(q).at(shape->inputs[0]), DType::Float16);
  EXPECT_EQ(producer(q, shape->inputs[0])->op_type, "MatMul");
  expect_close_to_float(f, q, inputs_of(f, 13));
}

TEST(Fp16, ExcludeByOpTypeAndName) {
  Model f = bn_cnn();
  QuantizeOptions o;
  o.exclude = {"Conv"};
  QuantizeResult r;
  Model q = fp16(f, o, &r);
  // The ops after conv1 follow it into float32 up to conv2 and on to the Gemm (Flatten follows
  // the float32 pooling too); only the Gemm runs in float16.
  EXPECT_EQ(r.quantized, 1);
  EXPECT_EQ(r.by_op["Gemm"], 1);
  ASSERT_EQ(r.skipped.size(), 2u) << "one line per excluded candidate, none for the followers";
  EXPECT_NE(r.skipped[0].find("conv1"), std::string::npos) << r.skipped[0];
  EXPECT_NE(r.skipped[1].find("conv2"), std::string::npos) << r.skipped[1];
  for (const Node* n : nodes_of(q, "Conv")) EXPECT_EQ(weight_type(q, *n), DType::Float) << n->name;
  EXPECT_EQ(weight_type(q, *nodes_of(q, "Gemm")[0]), DType::Float16);
  expect_close_to_float(f, q, inputs_of(f, 8));

  o.exclude = {"fc"};
  q = fp16(f, o, &r);
  EXPECT_EQ(r.quantized, 8);
  EXPECT_EQ(r.by_op.count("Gemm"), 0u);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("Gemm 'fc'"), std::string::npos) << r.skipped[0];
  EXPECT_EQ(q.graph.find_initializer("w3")->tensor.dtype(), DType::Float);
  expect_close_to_float(f, q, inputs_of(f, 8));
}

TEST(Fp16, ValuesBeyondTheFloat16RangeAreClampedAndWarned) {
  // An attention-style mask: 0 where allowed, -1e9 (beyond float16) where not; -inf stays -inf.
  std::mt19937 g(4);
  ModelBuilder b(17);
  b.input("x", {4, 16}).init("w", random_normal(g, {16, 8}, 0.25f));
  const float inf = std::numeric_limits<float>::infinity();
  b.init("mask", Tensor::from_vector<float>({0, 0, -1e9f, 0, -1e9f, 0, 0, -inf}, {8}));
  b.node("MatMul", {"x", "w"}, {"h"}, {}, "fc").node("Add", {"h", "mask"}, {"hm"}, {}, "mask_add");
  b.node("Softmax", {"hm"}, {"p"}, {}, "softmax");
  b.output("p", {4, 8});
  Model f = b.m;
  QuantizeOptions o;
  std::vector<std::string> warnings;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  Model q = fp16(f, o);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("2 float32 constant value(s)"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("65504"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("'mask'"), std::string::npos) << warnings[0];
  const Tensor& mask = q.graph.find_initializer("mask")->tensor;
  ASSERT_EQ(mask.dtype(), DType::Float16);
  EXPECT_EQ(mask.as_double(2), -65504.0);
  EXPECT_EQ(mask.as_double(4), -65504.0);
  EXPECT_EQ(mask.as_double(7), -inf);
  EXPECT_EQ(mask.as_double(0), 0.0);
  expect_close_to_float(f, q, inputs_of(f, 9));
  // Nothing to clamp, nothing said.
  warnings.clear();
  fp16(bn_cnn(), o);
  EXPECT_TRUE(warnings.empty());
}

// One op of the allow list: its inputs (graph inputs, or initializers) and attributes.
struct OpCase {
  std::string op;
  std::vector<In> inputs;
  std::vector<Attribute> attrs = {};
  int outputs = 1;
  int64_t opset = 17;
};

std::vector<OpCase> op_cases() {
  std::mt19937 g(21);
  auto r = [&](const Dims& d) { return random_normal(g, d); };
  auto ints = [](std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); };
  auto ai = [](const char* n, std::vector<int64_t> v) { return Attribute::make_ints(n, std::move(v)); };
  Tensor cond(DType::Bool, {2, 3, 4});
  for (int64_t i = 0; i < cond.numel(); ++i) cond.data<bool>()[i] = i % 3 == 0;
  Dims d{2, 3, 4};
  std::vector<OpCase> c{
      {"Conv", {{"x", r({1, 4, 6, 6})}, {"w", r({5, 4, 3, 3}), true}, {"b", r({5}), true}}, {ai("pads", {1, 1, 1, 1})}},
      {"ConvTranspose", {{"x", r({1, 4, 5, 5})}, {"w", r({4, 3, 3, 3}), true}}, {ai("strides", {2, 2})}},
      {"MatMul", {{"x", r({3, 8})}, {"w", r({8, 5}), true}}},
      {"Gemm", {{"a", r({3, 8})}, {"b", r({6, 8}), true}, {"c", r({6}), true}}, {Attribute::make_int("transB", 1)}},
      {"Einsum", {{"x", r({3, 4})}, {"y", r({4, 5})}}, {Attribute::make_string("equation", "ij,jk->ik")}},
      {"Add", {{"x", r(d)}, {"y", r({4})}}},
      {"Sub", {{"x", r(d)}, {"y", r({4})}}},
      {"Mul", {{"x", r(d)}, {"y", r({4})}}},
      {"Div", {{"x", r(d)}, {"y", random_uniform(g, {4}, 0.5f, 2.0f), true}}},
      {"Relu", {{"x", r(d)}}},
      {"LeakyRelu", {{"x", r(d)}}, {Attribute::make_float("alpha", 0.1f)}},
      {"PRelu", {{"x", r(d)}, {"slope", random_uniform(g, {4}, 0.0f, 0.5f), true}}},
      {"Sigmoid", {{"x", r(d)}}},
      {"HardSigmoid", {{"x", r(d)}}},
      {"HardSwish", {{"x", r(d)}}},
      {"Tanh", {{"x", r(d)}}},
      {"Erf", {{"x", r(d)}}},
      {"Elu", {{"x", r(d)}}},
      {"Selu", {{"x", r(d)}}},
      {"Softplus", {{"x", r(d)}}},
      {"Neg", {{"x", r(d)}}},
      {"Abs", {{"x", r(d)}}},
      {"Clip", {{"x", r(d)}, {"lo", Tensor::scalar<float>(-0.5f), true}, {"hi", Tensor::scalar<float>(0.5f), true}}},
      {"Clip", {{"x", r(d)}}, {Attribute::make_float("min", -0.5f), Attribute::make_float("max", 0.5f)}, 1, 10},
      {"MaxPool", {{"x", r({1, 2, 6, 6})}}, {ai("kernel_shape", {2, 2}), ai("strides", {2, 2})}, 2},
      {"AveragePool", {{"x", r({1, 2, 6, 6})}}, {ai("kernel_shape", {3, 3}), ai("pads", {1, 1, 1, 1})}},
      {"GlobalAveragePool", {{"x", r({1, 2, 5, 5})}}},
      {"GlobalMaxPool", {{"x", r({1, 2, 5, 5})}}},
      {"BatchNormalization",
       {{"x", r({1, 3, 4, 4})}, {"s", r({3}), true}, {"b", r({3}), true}, {"m", r({3}), true},
        {"v", random_uniform(g, {3}, 0.5f, 2.0f), true}}},
      {"Concat", {{"x", r({2, 3})}, {"y", r({2, 4})}}, {Attribute::make_int("axis", 1)}},
      {"Reshape", {{"x", r({2, 6})}, {"shape", ints({3, 4}), true}}},
      {"Transpose", {{"x", r(d)}}, {ai("perm", {1, 0, 2})}},
      {"Flatten", {{"x", r(d)}}, {Attribute::make_int("axis", 2)}},
      {"Squeeze", {{"x", r({2, 1, 4})}, {"axes", ints({1}), true}}},
      {"Unsqueeze", {{"x", r({2, 4})}, {"axes", ints({0}), true}}},
      {"Slice", {{"x", r({4, 6})}, {"starts", ints({1}), true}, {"ends", ints({3}), true}, {"axes", ints({1}), true}}},
      {"Gather", {{"x", r({5, 4})}, {"i", ints({0, 4, 2}), true}}},
      {"Split", {{"x", r({4, 6})}, {"split", ints({2, 4}), true}}, {Attribute::make_int("axis", 1)}, 2},
      {"Identity", {{"x", r(d)}}},
      {"Where", {{"c", cond}, {"x", r(d)}, {"y", r(d)}}},
      {"Expand", {{"x", r({3, 1})}, {"shape", ints({2, 3, 4}), true}}},
      {"Tile", {{"x", r({2, 3})}, {"repeats", ints({2, 2}), true}}},
      {"Pad", {{"x", r({2, 3})}, {"pads", ints({1, 0, 1, 2}), true}, {"value", Tensor::scalar<float>(0.5f), true}}},
      {"DepthToSpace", {{"x", r({1, 8, 2, 3})}}, {Attribute::make_int("blocksize", 2)}},
      {"SpaceToDepth", {{"x", r({1, 2, 4, 6})}}, {Attribute::make_int("blocksize", 2)}},
  };
  return c;
}

// Every op of the allow list runs in float16 on our runtime (reference kernels and fast paths),
// passes the checker with float16 inputs and outputs, and stays close to float32. Inputs are
// float16 (--fp16-io) so that the followers among them have a float16 input to follow.
TEST(Fp16, EveryAllowListedOpRunsInFloat16) {
  QuantizeOptions o;
  o.keep_io_float32 = false;
  for (const OpCase& c : op_cases()) {
    SCOPED_TRACE(c.op + " at opset " + std::to_string(c.opset));
    Model f = one_node(c.op, c.inputs, c.attrs, c.outputs, c.opset);
    f.graph.name = "one_op";
    std::map<std::string, Tensor> values;
    for (const In& i : c.inputs)
      if (!i.initializer) values[i.name] = i.value;
    // Declared outputs with the float model's shapes, as the checker wants them.
    auto want = run_model(f, values, false);
    for (ValueInfo& out : f.graph.outputs) {
      const Tensor& t = want.at(out.name).tensor;
      out.type = Type::tensor(t.dtype(), Shape::of(t.dims()));
    }
    for (ValueInfo& in : f.graph.inputs) in.type.shape = Shape::of(values.at(in.name).dims());
    QuantizeResult r;
    Model q = fp16(f, o, &r);
    EXPECT_EQ(r.quantized, 1);
    EXPECT_EQ(r.by_op[c.op], 1);
    EXPECT_EQ(count_op(q, "Cast"), 0);
    for (const ValueInfo& out : q.graph.outputs)
      EXPECT_EQ(out.type.elem, out.name == "y1" && c.op == "MaxPool" ? DType::Int64 : DType::Float16) << out.name;
    expect_close_to_float(f, q, values);
  }
}

// The command line writes the fp16 model and a report; --fp16-io makes the file's input float16.
class Fp16Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("t2o_fp16_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    save_model(cnn(), path("cnn.onnx"));
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  static ShellResult cli(const std::string& args) { return run_shell(std::string(T2O_CLI) + " " + args); }
  static nlohmann::json read_json(const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return nlohmann::json::parse(s.str());
  }
  fs::path dir_;
};

TEST_F(Fp16Cli, WritesModelAndReport) {
  for (bool io : {false, true}) {
    SCOPED_TRACE(io ? "--fp16-io" : "float32 io");
    std::string out = path(io ? "h_io.onnx" : "h.onnx"), rep = path(io ? "r_io.json" : "r.json");
    ShellResult r = cli("quantize " + path("cnn.onnx") + " -o " + out + " --mode fp16 --runs 1 --report " + rep +
                        (io ? " --fp16-io" : ""));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("fp16, 7 nodes quantized"), std::string::npos) << r.out;
    EXPECT_NO_THROW(check_model_file(out));
    Model q = load_model(out);
    EXPECT_EQ(q.graph.inputs[0].type.elem, io ? DType::Float16 : DType::Float);
    EXPECT_EQ(q.graph.outputs[0].type.elem, io ? DType::Float16 : DType::Float);
    nlohmann::json j = read_json(rep);
    EXPECT_EQ(j["mode"], "fp16");
    EXPECT_EQ(j["quantized_nodes"], 7);
    EXPECT_EQ(j["quantized_by_op"]["Conv"], 2);
    EXPECT_GE(j["accuracy"]["outputs"][0]["cosine"].get<double>(), 0.999);
    double wb = j["initializer_bytes"]["before"], wa = j["initializer_bytes"]["after"];
    EXPECT_NEAR(wb / wa, 2.0, 0.02);
  }
  EXPECT_EQ(cli("quantize " + path("cnn.onnx") + " -o " + path("x.onnx") + " --mode dynamic --fp16-io").code, 2);
}

// ONNX Runtime on the same files: an fp16 model is only useful if the runtimes users deploy on
// run it. ORT 1.30's CPU provider takes float16 Conv, MatMul, BatchNormalization, ... (it casts
// where it lacks a float16 kernel) and agrees with our runtime.
TEST(Fp16Ort, CnnAndTransformerRunInOnnxRuntime) {
  // As quant_interop_test gets it from ctest, so that this test also runs outside ctest.
  const char* home = std::getenv("HOME");
  const char* np = std::getenv("NODE_PATH");
  std::string modules = np && *np ? std::string(np) : std::string(home ? home : "") + "/.cache/torch2onnx/node_modules";
  std::string env = "NODE_PATH=" + modules + " ";
  if (std::system((env + "node -e \"require('onnxruntime-node')\" >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "onnxruntime-node is not installed (NODE_PATH)";
  struct TempDir {
    fs::path p = fs::temp_directory_path() / ("t2o_fp16_ort_" + std::to_string(::getpid()));
    ~TempDir() { fs::remove_all(p); }
  } dir;
  QuantizeOptions fp16_io;
  fp16_io.keep_io_float32 = false;
  int k = 0;
  for (auto [f, o] : {std::pair{bn_cnn(), QuantizeOptions{}}, {bn_cnn(), fp16_io}, {transformer(), QuantizeOptions{}}}) {
    SCOPED_TRACE("case " + std::to_string(k));
    fs::path d = dir.p / std::to_string(k++);
    fs::create_directories(d / "in");
    Model q = fp16(f, o);
    save_model(q, (d / "q.onnx").string());
    auto values = inputs_of(f, 11);
    auto feeds = feeds_for(q, values);
    write_npy((d / "in" / "input_0.npy").string(), feeds.at(q.graph.inputs[0].name).tensor);
    ShellResult r = run_shell(env + "node " + std::string(T2O_ORT_RUN) + " " + (d / "q.onnx").string() + " " +
                              (d / "in").string() + " " + (d / "out").string());
    ASSERT_EQ(r.code, 0) << r.out;
    Tensor ort = read_npy((d / "out" / "output_0.npy").string());
    Tensor ours = run_model(q, values).at(q.graph.outputs[0].name).tensor;
    EXPECT_EQ(ort.dtype(), ours.dtype());
    expect_close(ours, ort, 1e-2);
  }
}

}  // namespace
