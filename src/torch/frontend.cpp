#include "torch/frontend.h"
#include "torch/decompose.h"

#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/passes/peephole.h>
#include <torch/csrc/jit/passes/remove_dropout.h>
#include <torch/csrc/jit/passes/remove_mutation.h>
#include <torch/csrc/jit/serialization/import.h>

#include "ir/contain.h"
#include "ir/error.h"
#include "torch/pitfalls.h"
#include "torch/weights.h"

namespace t2o {

namespace tj = torch::jit;

namespace {
// The op a file calls that no loaded library defines, from libtorch's load error; "" for other errors.
std::string unknown_op(const std::string& msg) {
  auto k = msg.find("Unknown builtin op: ");
  if (k == std::string::npos) return {};
  return msg.substr(k + 20, msg.find_first_of(".\n", k + 20) - k - 20);
}
}  // namespace

tj::Module load_module(const std::string& path) {
  register_newer_torch_ops();
  tj::Module module;
  try {
    if (is_zip_file(path)) check_torchscript_archive(path);
    // libtorch 1.13's importer crashes on some malformed files that its checks let through (a
    // free of a bad pointer compiling a loop whose carried value is renamed, ...). Each load runs
    // once in a forked child first: a child that dies makes the file an input error. The child
    // ignores exceptions; the load here raises them again with their messages.
    auto load = [&] {
      run_contained(
          [&] {
            try {
              run_with_large_stack([&] { tj::load(path, torch::kCPU); });
            } catch (...) {
            }
            return std::string("ok");
          },
          300,
          [&](const std::string& how) {
            return "libtorch's TorchScript importer " + how + " reading '" + path +
                   "': the file is malformed in a way libtorch does not check";
          },
          "regenerate the file with torch.jit.save");
      run_with_large_stack([&] { module = tj::load(path, torch::kCPU); });
    };
    try {
      load();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      if (dynamic_cast<const c10::Error*>(&e) || unknown_op(e.what()).rfind("torchvision::", 0) != 0 ||
          load_torchvision_ops().empty())
        throw;
      load();  // torchvision's ops are registered now
    }
    check_module_tensors(module);
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    msg = msg.substr(0, msg.find('\n'));
    explain_non_torchscript(path);  // torch.save files get a message saying what they are
    throw InputError("cannot load TorchScript file '" + path + "': " + msg,
                     "save the model with torch.jit.script(m).save(path) or torch.jit.trace(m, x).save(path)");
  } catch (const std::exception& e) {  // jit::ErrorReport: e.g. an op whose library is not loaded
    std::string msg = e.what();
    msg.erase(0, msg.find_first_not_of(" \n"));
    std::string op = unknown_op(msg);
    if (!op.empty()) {
      std::string hint = op.rfind("torchvision::", 0) == 0 && load_torchvision_ops().empty()
                             ? "install torchvision's operator library (Debian: python3-torchvision) or name it "
                               "with T2O_TORCHVISION_LIB=/path/to/torchvision/_C.so; or declare it: "
                             : "declare it: ";
      throw InputError("cannot load TorchScript file '" + path + "': it calls " + op +
                           ", which no loaded library defines",
                       hint + "--custom-op '" + op + "(Tensor x, ...) -> Tensor=DOMAIN::OpName' "
                       "(see docs/pitfalls.md, custom operators)");
    }
    throw InputError("cannot load TorchScript file '" + path + "': " + msg.substr(0, msg.find('\n')));
  }
  return module;
}

namespace {
// A type a graph input can take: tensors, numbers, strings, None, and Optional / List / Tuple of
// those; not classes, nor named tuples (a PackedSequence).
bool plain_input_type(const c10::TypePtr& t) {
  using K = c10::TypeKind;
  switch (t->kind()) {
    case K::TensorType: case K::IntType: case K::FloatType: case K::BoolType: case K::NumberType:
    case K::StringType: case K::NoneType:
      return true;
    case K::OptionalType: case K::ListType:
      return plain_input_type(t->containedType(0));
    case K::TupleType: {
      if (t->expect<c10::TupleType>()->schema()) return false;
      for (const auto& e : t->containedTypes())
        if (!plain_input_type(e)) return false;
      return true;
    }
    default:
      return false;
  }
}

// The tracer records a Python float in a tensor argument (`torch.arange(n) * 0.5`) as a 0-d
// float64 constant tensor. In eager PyTorch the number was a wrapped scalar: an integer tensor
// times 0.5 is float32, and the traced graph says so. Saved and loaded, the constant is a plain 0-d
// float64 tensor, which promotes that product to float64: libtorch's plain interpreter and
// torch.jit.freeze then compute float64 (the frozen model fails with "expected scalar type Double
// but found Float"), while its optimizing executor and eager PyTorch give float32. Each use of such
// a constant takes it as a number, in the op's Scalar overload, where the op has one: the same
// value, eager's dtypes (a float64 0-d tensor changes no other promotion than an integer or bool
// tensor's).
void unwrap_traced_numbers(tj::Block* b) {
  for (tj::Node* n : b->nodes()) {
    for (tj::Block* sub : n->blocks()) unwrap_traced_numbers(sub);
    if (n->kind() != c10::prim::Constant || !n->output()->type()->cast<c10::TensorType>() || !n->hasAttribute(tj::attr::value))
      continue;
    const at::Tensor& t = n->t(tj::attr::value);
    if (!t.defined() || t.dim() != 0 || t.requires_grad()) continue;
    if (t.scalar_type() != at::kDouble && t.scalar_type() != at::kComplexDouble) continue;
    c10::IValue number = t.is_complex() ? c10::IValue(t.item<c10::complex<double>>()) : c10::IValue(t.item<double>());
    tj::Value* scalar = nullptr;
    const auto uses = n->output()->uses();
    for (const tj::Use& u : uses) {
      if (!scalar) {
        tj::WithInsertPoint guard(n);
        scalar = b->owningGraph()->insertConstant(number);
      }
      u.user->replaceInput(u.offset, scalar);
      if (!u.user->maybeSchema()) u.user->replaceInput(u.offset, n->output());
    }
  }
}
}  // namespace

std::string forward_method_name(const tj::Module& module) {
  if (module.find_method("forward")) return "forward";
  for (int k = 0;; ++k) {
    std::string name = "forward__" + std::to_string(k);
    auto m = module.find_method(name);
    if (!m) return {};
    const auto& args = m->function().getSchema().arguments();
    bool plain = true;
    for (size_t i = 1; i < args.size(); ++i) plain = plain && plain_input_type(args[i].type());
    if (plain) return name;
  }
}

PreparedGraph load_and_prepare(const std::string& path, const std::function<void(const std::string&)>& warn,
                               const std::string& weights, bool keep_training) {
  tj::Module module = load_module(path);
  if (!weights.empty()) load_weights(module, weights, warn);
  // Models saved mid-training convert in eval mode; say which submodules that changes.
  std::vector<std::string> training;
  for (const auto& m : module.named_modules())
    if (m.value.is_training()) training.push_back(m.name.empty() ? "(root)" : m.name);
  if (!training.empty() && !keep_training) {
    std::string list;
    for (size_t i = 0; i < training.size() && i < 8; ++i) list += (i ? ", " : "") + training[i];
    if (training.size() > 8) list += ", ... (" + std::to_string(training.size()) + " in all)";
    warn("model was saved in training mode; converting in eval mode (dropout off, batchnorm uses running "
         "stats). Submodules in training mode: " + list);
  }
  if (keep_training) module.train();
  else module.eval();
  const std::string forward = forward_method_name(module);
  if (forward.empty()) throw InputError("TorchScript file '" + path + "' has no forward() method");
  if (forward != "forward")
    warn("forward() is overloaded (as a scripted nn.LSTM's is); converting the overload '" + forward +
         "', the first that takes tensors");
  for (const auto& m : module.modules())
    for (const auto& method : m.get_methods()) unwrap_traced_numbers(method.graph()->block());
  tj::Module frozen;
  try {
    frozen = forward == "forward" ? tj::freeze_module(module) : tj::freeze_module(module, {forward});
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    throw Error("cannot freeze the model: " + msg.substr(0, msg.find('\n')));
  }
  auto method = frozen.get_method(forward);
  PreparedGraph p;
  p.module = module;
  p.graph = method.graph()->copy();
  const auto& args = method.function().getSchema().arguments();
  p.arguments.assign(args.begin() + 1, args.end());

  auto& g = p.graph;
  tj::Inline(*g);
  dynamic_default_rnn_states(*g);
  std::vector<std::string> assigned = thread_module_state(*g, frozen._ivalue());
  if (!assigned.empty()) {
    std::string list;
    for (size_t i = 0; i < assigned.size() && i < 8; ++i) list += (i ? ", " : "") + assigned[i];
    if (assigned.size() > 8) list += ", ... (" + std::to_string(assigned.size()) + " in all)";
    warn("forward() assigns module attributes (" + list + "); the ONNX model has no state: every call starts "
         "from their saved values, as the first call of the PyTorch module does");
  }
  resolve_module_attributes(*g, frozen._ivalue());
  if (!g->inputs().empty() && !g->inputs()[0]->hasUses()) g->eraseInput(0);
  if (!g->inputs().empty() && g->inputs()[0]->type()->cast<c10::ClassType>())
    throw Error("the model's forward reads module state that cannot be resolved at conversion time",
                "file a report with the model");
  std::vector<std::string> baked = keep_training ? std::vector<std::string>{} : to_inference_semantics(*g);
  if (!baked.empty()) {
    std::string list;
    for (const auto& b : baked) list += (list.empty() ? "" : "; ") + b;
    warn("the graph has training-mode behaviour built in (traced in train()?); converted with inference "
         "semantics (dropout removed, norms use running statistics): " + list);
  }
  if (!keep_training) tj::removeDropout(g);
  decompose_ops(*g);
  // Not EliminateExceptions: it loops forever on some graphs; the If converter drops raising
  // branches instead.
  tj::RemoveListMutation(g);
  tj::RemoveTensorMutation(g);
  // Not LowerAllTuples: it corrupts graphs like torchvision's ViT; tuple inputs and outputs are
  // flattened by the converter instead.
  tj::LowerSimpleTuples(g);
  // GPU-scripted code: torch.device("cuda") -> cpu
  if (int devices = normalize_devices(*g))
    p.notes.push_back("device constants: " + std::to_string(devices) +
                      " CUDA device use(s) in the TorchScript code (torch.device('cuda'), .cuda()) now mean the CPU; "
                      "the ONNX model has no devices");
  tj::ConstantPropagation(g);
  tj::PeepholeOptimize(g);
  tj::EliminateDeadCode(g);
  return p;
}

}  // namespace t2o
