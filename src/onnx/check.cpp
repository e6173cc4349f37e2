#include "onnx/check.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>

#include "ir/contain.h"
#include "onnx/model_io.h"

namespace t2o {

namespace {

// The onnx library prefixes messages with source locations and repeats context over several
// lines; one line with the node is what a person needs.
std::string tidy(std::string msg) {
  for (char& c : msg)
    if (c == '\n') c = ' ';
  while (!msg.empty() && msg.back() == ' ') msg.pop_back();
  const std::string prefix = "[ShapeInferenceError] ";
  if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
  return msg;
}

// Models near 2 GB exceed protobuf's default 64 MB parse limit.
bool parse_proto(const std::string& bytes, onnx::ModelProto& p) {
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT32_MAX);
  return p.ParseFromCodedStream(&coded);
}

onnx::ModelProto to_proto(const Model& m) {
  onnx::ModelProto p;
  model_to_proto(m, p);
  return p;
}

void check_proto(onnx::ModelProto& proto, const std::string& what) {
  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception& e) {
    throw InputError(what + " is not a valid ONNX model: " + tidy(e.what()));
  }
  try {
    onnx::ShapeInferenceOptions opts{/*check_type=*/true, /*error_mode=*/1, /*enable_data_propagation=*/false};
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), opts);
  } catch (const std::exception& e) {
    throw InputError(what + " fails shape inference: " + tidy(e.what()));
  }
}

int g_contain_timeout = 300;

// What crosses the pipe back from the child stays small: large initializers are left out (the
// parent has them) and put back by name.
constexpr size_t kStripBytes = 4096;

template <typename F>
void for_each_subgraph(onnx::GraphProto& g, F&& f) {
  for (auto& n : *g.mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) f(*a.mutable_g());
      for (auto& sg : *a.mutable_graphs()) f(sg);
    }
}

void strip_weights(onnx::GraphProto& g) {
  for (auto& t : *g.mutable_initializer())
    if (t.raw_data().size() >= kStripBytes) t.set_raw_data("");
  for_each_subgraph(g, [](onnx::GraphProto& sg) { strip_weights(sg); });
}

void collect_weights(const onnx::GraphProto& g, std::map<std::string, const onnx::TensorProto*>& out) {
  for (const auto& t : g.initializer())
    if (t.raw_data().size() >= kStripBytes) out.emplace(t.name(), &t);
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_weights(a.g(), out);
      for (const auto& sg : a.graphs()) collect_weights(sg, out);
    }
}

void restore_weights(onnx::GraphProto& g, const std::map<std::string, const onnx::TensorProto*>& w) {
  for (auto& t : *g.mutable_initializer()) {
    auto it = w.find(t.name());
    if (t.has_raw_data() && t.raw_data().empty() && it != w.end()) t.set_raw_data(it->second->raw_data());
  }
  for_each_subgraph(g, [&](onnx::GraphProto& sg) { restore_weights(sg, w); });
}

// Shape inference only adds types: copy value_info, inputs and outputs from the inferred graph
// into the original one, subgraphs matched by position (inference does not change the nodes).
void take_types(onnx::GraphProto& dst, const onnx::GraphProto& src) {
  *dst.mutable_value_info() = src.value_info();
  if (src.input_size() == dst.input_size()) *dst.mutable_input() = src.input();
  if (src.output_size() == dst.output_size()) *dst.mutable_output() = src.output();
  if (src.node_size() != dst.node_size()) return;
  for (int i = 0; i < dst.node_size(); ++i) {
    auto& dn = *dst.mutable_node(i);
    const auto& sn = src.node(i);
    if (dn.attribute_size() != sn.attribute_size()) continue;
    for (int k = 0; k < dn.attribute_size(); ++k) {
      auto& da = *dn.mutable_attribute(k);
      const auto& sa = sn.attribute(k);
      if (da.has_g() && sa.has_g()) take_types(*da.mutable_g(), sa.g());
      if (da.graphs_size() == sa.graphs_size())
        for (int j = 0; j < da.graphs_size(); ++j) take_types(*da.mutable_graphs(j), sa.graphs(j));
    }
  }
}

// onnx 1.12's checker, shape inference and version converter trust parts of the model they do
// not validate (a scalar STFT signal, an out-of-range LayerNormalization axis, ... crash them).
// They run in a forked child: its result comes back through a pipe, and a child that dies by a
// signal, or runs past the timeout, becomes an InputError instead of taking the process down.
// `f` returns the bytes to hand back; an Error it throws is carried over with its exit code.
std::string run_contained(const std::string& tool, const std::string& subject, const std::function<std::string()>& f) {
  onnx::OpSchemaRegistry::Instance();  // initialised before the fork, not in the child
  return t2o::run_contained(f, g_contain_timeout, [&](const std::string& how) {
    return "onnx's " + tool + " " + how + " on " + subject + ": the model is malformed in a way the onnx library does not check";
  }, "run 'torch2onnx run' on it to find the node, or regenerate the model");
}

}  // namespace

void set_onnx_call_timeout(int seconds) { g_contain_timeout = seconds > 0 ? seconds : 300; }

void check_model_file(const std::string& path) {
  // Load through our reader first: it gives clear messages for missing/corrupt files and reads
  // external data, so the checker sees the complete model.
  Model m = load_model(path);
  onnx::ModelProto proto = to_proto(m);
  std::string what = "'" + path + "'";
  run_contained("checker", what, [&] {
    check_proto(proto, what);
    return std::string("ok");
  });
}

void check_model(const Model& model) {
  onnx::ModelProto proto = to_proto(model);
  run_contained("checker", "the model", [&] {
    check_proto(proto, "model");
    return std::string("ok");
  });
}

Model infer_shapes(const Model& model, bool strict) {
  onnx::ModelProto proto = to_proto(model);
  std::string bytes = run_contained("shape inference", "the model", [&] {
    try {
      onnx::ShapeInferenceOptions opts{true, strict ? 1 : 0, false};
      onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), opts);
    } catch (const std::exception& e) {
      throw InputError("shape inference failed: " + tidy(e.what()));
    }
    strip_weights(*proto.mutable_graph());
    return proto.SerializeAsString();
  });
  onnx::ModelProto inferred;
  if (!parse_proto(bytes, inferred)) throw Error("shape inference returned an unreadable model");
  onnx::ModelProto original = to_proto(model);
  take_types(*original.mutable_graph(), inferred.graph());
  return model_from_proto(original);
}

Model convert_version(const Model& model, int target_opset) {
  onnx::ModelProto proto = to_proto(model);
  std::string bytes = run_contained("version converter", "the model", [&] {
    try {
      onnx::ModelProto out = onnx::version_conversion::ConvertVersion(proto, target_opset);
      strip_weights(*out.mutable_graph());
      return out.SerializeAsString();
    } catch (const std::exception& e) {
      throw Error("cannot convert the model to opset " + std::to_string(target_opset) + ": " + tidy(e.what()));
    }
  });
  onnx::ModelProto out;
  if (!parse_proto(bytes, out)) throw Error("the version converter returned an unreadable model");
  std::map<std::string, const onnx::TensorProto*> weights;
  collect_weights(proto.graph(), weights);
  restore_weights(*out.mutable_graph(), weights);
  try {
    return model_from_proto(out);
  } catch (const std::exception& e) {
    throw Error("cannot convert the model to opset " + std::to_string(target_opset) + ": " + tidy(e.what()));
  }
}

}  // namespace t2o
