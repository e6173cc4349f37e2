// Traced RNNs without an initial state: nn.RNN/LSTM/GRU create zeros of the traced batch size
// (`int(batch_sizes[0])` or `input.size(1)` become constants in the trace), so the traced model
// only runs at that batch. The zeros are rebuilt from the batch the RNN gets at run time, as
// torch.onnx's peephole pass does for the default RNN state.
#include <torch/csrc/jit/ir/ir.h>

#include <optional>

#include "torch/pitfalls.h"

namespace t2o {

namespace tj = torch::jit;

namespace {

bool is_rnn(const tj::Node* n) {
  static const c10::Symbol kinds[] = {c10::aten::rnn_tanh, c10::aten::rnn_relu, c10::aten::lstm, c10::aten::gru};
  for (auto k : kinds)
    if (n->kind() == k) return true;
  return false;
}

// The 3 dims of `v` when it is zeros made from constant sizes (aten::zeros, or the constant tensor
// freezing folds that into) and read by nothing else than `user`.
std::optional<std::vector<int64_t>> constant_zeros(tj::Value* v, const tj::Node* user) {
  for (const tj::Use& u : v->uses())
    if (u.user != user) return std::nullopt;
  tj::Node* z = v->node();
  if (z->kind() == c10::aten::zeros) {
    auto sizes = tj::toIValue(z->input(0));
    if (!sizes || !sizes->isIntList() || sizes->toIntVector().size() != 3) return std::nullopt;
    return sizes->toIntVector();
  }
  if (z->kind() != c10::prim::Constant) return std::nullopt;
  auto c = tj::toIValue(v);
  if (!c || !c->isTensor()) return std::nullopt;
  const at::Tensor& t = c->toTensor();
  if (t.dim() != 3 || !t.is_floating_point() || t.numel() == 0 || t.count_nonzero().item<int64_t>() != 0)
    return std::nullopt;
  return t.sizes().vec();
}

// The dtype of the zeros (the tensor's, for a folded constant).
tj::Value* zeros_dtype(tj::Graph& g, tj::Value* v) {
  if (v->node()->kind() == c10::aten::zeros) return v->node()->input(1);
  return g.insertConstant(static_cast<int64_t>(tj::toIValue(v)->toTensor().scalar_type()));
}

// Defined before `at` (graph inputs and values of enclosing blocks are).
bool defined_before(const tj::Value* v, const tj::Node* at) {
  const tj::Node* d = v->node();
  if (d->kind() == c10::prim::Param) return true;
  if (d->owningBlock() == at->owningBlock()) return d->isBefore(at);
  return true;
}

int fix_block(tj::Block* b) {
  int changed = 0;
  auto* g = b->owningGraph();
  for (tj::Node* n : b->nodes()) {
    for (tj::Block* sub : n->blocks()) changed += fix_block(sub);
    if (!is_rnn(n) || n->inputs().size() != 9) continue;
    // *.input(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
    // *.data(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional)
    bool packed = n->input(3)->type()->kind() == c10::TypeKind::ListType;
    size_t hx_at = packed ? 2 : 1;
    tj::Value* hx = n->input(hx_at);
    // LSTM's (h, c) folded by freezing into one constant list: made a list of two constants again.
    if (hx->node()->kind() == c10::prim::Constant && hx->uses().size() == 1) {
      auto list = tj::toIValue(hx);
      if (list && list->isTensorList()) {
        tj::WithInsertPoint guard(n);
        std::vector<tj::Value*> parts;
        for (const at::Tensor& t : list->toTensorVector()) parts.push_back(g->insertConstant(t));
        tj::Node* lc = g->insertNode(g->createList(c10::TensorType::get(), parts));
        n->replaceInput(hx_at, lc->output());
        hx = lc->output();
      }
    }
    tj::Node* user = n;
    std::vector<tj::Value*> states;
    if (hx->node()->kind() == c10::prim::ListConstruct) {
      user = hx->node();
      states.assign(user->inputs().begin(), user->inputs().end());
    } else {
      states.push_back(hx);
    }
    bool all_zeros = !states.empty();
    for (tj::Value* h : states) all_zeros = all_zeros && constant_zeros(h, user);
    if (!all_zeros) continue;
    std::optional<bool> batch_first;
    if (!packed) {
      auto bf = tj::toIValue(n->input(8));
      if (!bf || !bf->isBool()) continue;
      batch_first = bf->toBool();
    }
    if (!defined_before(n->input(packed ? 1 : 0), user)) continue;
    tj::WithInsertPoint guard(user);
    tj::Value* batch = packed ? g->insert(c10::aten::Int, {g->insert(c10::aten::select, {n->input(1), 0, 0})})
                              : g->insert(c10::aten::size, {n->input(0), *batch_first ? 0 : 1});
    for (size_t k = 0; k < user->inputs().size(); ++k) {
      tj::Value* h = user->input(k);
      if (user == n && h != hx) continue;
      std::vector<int64_t> s = *constant_zeros(h, user);
      tj::Value* sizes =
          g->insertNode(g->createList(c10::IntType::get(), {g->insertConstant(s[0]), batch, g->insertConstant(s[2])}))
              ->output();
      tj::Value* none = g->insertConstant(c10::IValue());
      tj::Node* fresh = g->insertNode(g->create(c10::aten::zeros, {sizes, zeros_dtype(*g, h), none, none, none}));
      fresh->output()->setType(c10::TensorType::get());
      fresh->copyMetadata(user);
      user->replaceInput(k, fresh->output());
    }
    ++changed;
  }
  return changed;
}

}  // namespace

int dynamic_default_rnn_states(tj::Graph& g) { return fix_block(g.block()); }

}  // namespace t2o
