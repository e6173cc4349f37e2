#include "verify/torch_run.h"

#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <mutex>

#include "torch/context.h"
#include "torch/frontend.h"
#include "torch/profile.h"

namespace t2o {

namespace tj = torch::jit;

namespace {

// Where the capture op puts values; one run at a time per thread.
thread_local std::vector<c10::IValue>* t_capture = nullptr;

void register_capture_op() {
  static std::once_flag once;
  std::call_once(once, [] {
    tj::registerOperator(tj::Operator(
        "t2o_verify::capture(Any x, int id) -> ()",
        [](tj::Stack& stack) {
          auto id = static_cast<size_t>(stack.back().toInt());
          c10::IValue v = stack[stack.size() - 2];
          stack.pop_back();
          stack.pop_back();
          if (!t_capture) return;
          // A copy: later in-place ops must not change what we saw here.
          (*t_capture)[id] = v.isTensor() && v.toTensor().defined() ? c10::IValue(v.toTensor().clone()) : v;
        },
        c10::AliasAnalysisKind::CONSERVATIVE));
  });
}

bool capturable(const tj::Value* v) {
  auto k = v->type()->kind();
  return k == c10::TypeKind::TensorType || k == c10::TypeKind::IntType || k == c10::TypeKind::FloatType ||
         k == c10::TypeKind::BoolType || k == c10::TypeKind::NumberType;
}

void flatten(const c10::IValue& v, std::vector<Tensor>& out) {
  if (v.isTensor()) out.push_back(tensor_from_torch(v.toTensor()));
  else if (v.isInt()) out.push_back(Tensor::scalar<int64_t>(v.toInt()));
  else if (v.isDouble()) out.push_back(Tensor::scalar<float>(static_cast<float>(v.toDouble())));
  else if (v.isBool()) out.push_back(Tensor::scalar<bool>(v.toBool()));
  else if (v.isList())
    for (const c10::IValue& e : v.toListRef()) flatten(e, out);
  else if (v.isTuple())
    for (const c10::IValue& e : v.toTupleRef().elements()) flatten(e, out);
  else if (v.isGenericDict())  // by value in insertion order, as convert flattens dict outputs
    for (const auto& e : v.toGenericDict()) flatten(e.value(), out);
  else if (!v.isNone())
    throw Error("the PyTorch model returns a " + v.tagKind() + ", which has no ONNX counterpart");
}

}  // namespace

struct TorchModel::Impl {
  PreparedGraph prep;
  std::shared_ptr<tj::Graph> plain, instrumented;
  std::vector<std::string> names;  // capture id -> debugName in prep.graph
  std::unique_ptr<tj::Code> plain_code, capture_code;

  // forward()'s arguments from flattened inputs, leaves matched to the graph inputs.
  tj::Stack stack(const std::map<std::string, at::Tensor>& by_name) const {
    std::function<c10::IValue(const c10::TypePtr&, const std::string&, const std::optional<c10::IValue>&)> arg =
        [&](const c10::TypePtr& type, const std::string& name, const std::optional<c10::IValue>& dflt) -> c10::IValue {
      using K = c10::TypeKind;
      if (type->kind() == K::TupleType) {
        std::vector<c10::IValue> elems;
        auto tt = type->expect<c10::TupleType>();
        for (size_t i = 0; i < tt->elements().size(); ++i)
          elems.push_back(arg(tt->elements()[i], name + "." + std::to_string(i), std::nullopt));
        return c10::ivalue::Tuple::create(std::move(elems));
      }
      if (type->kind() == K::ListType) {
        c10::List<at::Tensor> list;
        for (size_t i = 0; by_name.count(name + "." + std::to_string(i)); ++i)
          list.push_back(by_name.at(name + "." + std::to_string(i)));
        if (!list.empty()) return list;
      }
      if (auto it = by_name.find(name); it != by_name.end()) {
        // Number arguments are 0-d ONNX inputs.
        if (type->kind() == K::IntType) return it->second.item<int64_t>();
        if (type->kind() == K::FloatType) return it->second.item<double>();
        if (type->kind() == K::BoolType) return it->second.item<bool>();
        return it->second;
      }
      if (dflt) return *dflt;
      if (type->kind() == K::OptionalType) return c10::IValue();
      throw Error("the ONNX model has no input for forward() argument '" + name + "'",
                  "was the ONNX model converted from this .pt file?", kExitUsage);
    };
    std::vector<c10::IValue> args;
    for (const c10::Argument& a : prep.arguments) {
      std::optional<c10::IValue> dflt;  // not std::optional(a.default_value()): that holds None when empty
      if (a.default_value()) dflt = *a.default_value();
      args.push_back(arg(a.type(), a.name(), dflt));
    }
    size_t n_in = prep.graph->inputs().size();
    if (n_in == args.size()) return args;
    // Tuple arguments were split into their leaves by tuple lowering.
    tj::Stack leaves;
    std::function<void(const c10::IValue&)> collect = [&](const c10::IValue& v) {
      if (v.isTuple())
        for (const auto& e : v.toTupleRef().elements()) collect(e);
      else
        leaves.push_back(v);
    };
    for (const auto& a : args) collect(a);
    if (leaves.size() != n_in)
      throw Error("internal: " + std::to_string(n_in) + " graph inputs for " + std::to_string(leaves.size()) +
                  " argument parts");
    return leaves;
  }
};

TorchModel::TorchModel(const std::string& pt_path, const std::function<void(const std::string&)>& warn)
    : impl_(std::make_unique<Impl>()) {
  register_capture_op();
  Impl& m = *impl_;
  m.prep = load_and_prepare(pt_path, warn);
  m.plain = m.prep.graph->copy();
  guard_rnns(*m.plain);
  m.instrumented = m.prep.graph->copy();
  // copy() keeps node order, so zipping the two node lists maps copied values to the names of
  // the prepared graph (unnamed values print as their unique id, which a copy renumbers).
  std::vector<tj::Node*> orig(m.prep.graph->nodes().begin(), m.prep.graph->nodes().end());
  std::vector<tj::Node*> copy(m.instrumented->nodes().begin(), m.instrumented->nodes().end());
  auto& g = *m.instrumented;
  auto record = [&](tj::Value* v, const std::string& name, tj::Node* after) -> tj::Node* {
    tj::Value* id = g.insertConstant(static_cast<int64_t>(m.names.size()));
    id->node()->moveAfter(after);
    tj::Node* rec = g.create(c10::Symbol::fromQualString("t2o_verify::capture"), 0);
    rec->addInput(v);
    rec->addInput(id);
    rec->insertAfter(id->node());
    m.names.push_back(name);
    return rec;
  };
  tj::Node* anchor = g.param_node();
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (capturable(g.inputs()[i])) anchor = record(g.inputs()[i], m.prep.graph->inputs()[i]->debugName(), anchor);
  for (size_t k = 0; k < orig.size(); ++k) {
    tj::Node* after = copy[k];
    for (size_t o = 0; o < copy[k]->outputs().size(); ++o)
      if (capturable(copy[k]->outputs()[o])) after = record(copy[k]->outputs()[o], orig[k]->outputs()[o]->debugName(), after);
    std::string kind = orig[k]->kind().toQualString();
    if (!orig[k]->inputs().empty() && kind.size() > 1 && kind.back() == '_')
      mutated_.insert(orig[k]->inputs()[0]->debugName());
  }
  m.plain_code = std::make_unique<tj::Code>(m.plain, "t2o_verify_plain");
  guard_rnns(*m.instrumented);  // after the node lists are zipped: the checks add nodes
  m.capture_code = std::make_unique<tj::Code>(m.instrumented, "t2o_verify_capture");
}

TorchModel::~TorchModel() = default;

TorchRun TorchModel::run(const std::vector<std::pair<std::string, Tensor>>& inputs, bool capture) {
  Impl& m = *impl_;
  std::map<std::string, at::Tensor> by_name;
  for (const auto& [n, t] : inputs) by_name[n] = tensor_to_torch(t);
  tj::Stack stack = m.stack(by_name);
  std::vector<c10::IValue> captured(capture ? m.names.size() : 0);
  at::NoGradGuard no_grad;
  try {
    t_capture = capture ? &captured : nullptr;
    tj::InterpreterState state(capture ? *m.capture_code : *m.plain_code);
    state.run(stack);
    t_capture = nullptr;
  } catch (const c10::Error& e) {
    t_capture = nullptr;
    std::string msg = e.what_without_backtrace();
    throw Error("PyTorch fails on these inputs: " + msg.substr(0, msg.find('\n')), {}, kExitUsage);
  } catch (const Error&) {
    t_capture = nullptr;
    throw;
  } catch (const std::exception& e) {
    // The interpreter reports errors raised by the model's own code (a failed shape check in
    // TorchScript) as JITException, which is not a c10::Error: the last line is the message.
    t_capture = nullptr;
    std::string msg = e.what();
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    throw Error("PyTorch fails on these inputs: " + msg.substr(msg.rfind('\n') + 1), {}, kExitUsage);
  }
  TorchRun r;
  for (const c10::IValue& v : stack) flatten(v, r.outputs);
  for (size_t i = 0; i < captured.size(); ++i) {
    const c10::IValue& v = captured[i];
    if (v.isNone() || (v.isTensor() && !v.toTensor().defined())) continue;
    try {
      std::vector<Tensor> one;
      flatten(v, one);
      if (one.size() == 1) r.values[m.names[i]] = one[0];
    } catch (const Error&) {
    }  // dtypes without an ONNX counterpart are simply not compared
  }
  return r;
}

std::map<std::string, InputRole> TorchModel::input_roles() const {
  return t2o::input_roles(*impl_->prep.graph);
}

}  // namespace t2o
