// Ops of newer PyTorch releases that TorchScript files saved by them call. libtorch 1.13 cannot
// load such a file unless the op is known, so the frontend registers these (with a CPU kernel for
// the profiling runs and verify) before loading; the converters in ops/ handle them like any op.
#include <torch/csrc/jit/runtime/operator.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "torch/pitfalls.h"

namespace t2o {

namespace tj = torch::jit;

namespace {

// F.scaled_dot_product_attention (PyTorch 2.0; `scale` from 2.1), inference semantics: a bool
// mask marks the keys that take part, a float mask is added, is_causal keeps keys j <= i.
at::Tensor sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const c10::optional<at::Tensor>& mask,
                bool is_causal, c10::optional<double> scale) {
  double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor s = at::matmul(q, k.transpose(-2, -1)) * sc;
  if (is_causal) {
    at::Tensor keep = at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool)).tril();
    s = s.masked_fill(keep.logical_not(), -std::numeric_limits<double>::infinity());
  } else if (mask && mask->defined()) {
    if (mask->scalar_type() == at::kBool)
      s = s.masked_fill(mask->logical_not(), -std::numeric_limits<double>::infinity());
    else
      s = s + *mask;
  }
  return at::matmul(at::softmax(s, -1), v);
}

}  // namespace

void register_newer_torch_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* schema =
        "aten::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
        "float dropout_p=0.0, bool is_causal=False, *, float? scale=None) -> Tensor";
    if (!tj::getAllOperatorsFor(c10::Symbol::fromQualString("aten::scaled_dot_product_attention")).empty()) return;
    tj::registerOperator(tj::Operator(
        schema,
        [](tj::Stack& stack) {
          auto scale = stack.back().toOptional<double>();
          bool causal = stack[stack.size() - 2].toBool();
          auto mask = stack[stack.size() - 4].toOptional<at::Tensor>();
          at::Tensor v = stack[stack.size() - 5].toTensor(), k = stack[stack.size() - 6].toTensor(),
                     q = stack[stack.size() - 7].toTensor();
          tj::drop(stack, 7);
          tj::push(stack, sdpa(q, k, v, mask, causal, scale));
        },
        c10::AliasAnalysisKind::FROM_SCHEMA));
  });
}

}  // namespace t2o
