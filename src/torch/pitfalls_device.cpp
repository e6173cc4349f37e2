#include <torch/csrc/jit/ir/ir.h>

#include "torch/pitfalls.h"

namespace t2o {

namespace tj = torch::jit;

namespace {

bool is_cuda_string(const std::string& s) { return s.rfind("cuda", 0) == 0; }

int fix_block(tj::Block* b) {
  int changed = 0;
  auto* g = b->owningGraph();
  for (auto it = b->nodes().begin(); it != b->nodes().end();) {
    tj::Node* n = *it++;
    for (tj::Block* sub : n->blocks()) changed += fix_block(sub);
    if (n->kind() == c10::prim::Constant && n->output()->type()->kind() == c10::TypeKind::DeviceObjType) {
      auto v = tj::toIValue(n->output());
      if (v && v->isDevice() && v->toDevice().is_cuda()) {
        tj::WithInsertPoint guard(n);
        n->output()->replaceAllUsesWith(g->insertConstant(c10::Device(c10::kCPU)));
        n->destroy();
        ++changed;
      }
    } else if (n->kind() == c10::aten::device && n->inputs().size() == 1 &&
               n->input(0)->type()->kind() == c10::TypeKind::StringType) {
      // torch.device("cuda") / torch.device("cuda:1")
      auto s = tj::toIValue(n->input(0));
      if (s && is_cuda_string(s->toStringRef())) {
        tj::WithInsertPoint guard(n);
        n->output()->replaceAllUsesWith(g->insertConstant(c10::Device(c10::kCPU)));
        n->destroy();
        ++changed;
      }
    } else if (n->kind().toQualString() == std::string("aten::cuda") && n->inputs().size() >= 1) {
      n->output()->replaceAllUsesWith(n->input(0));
      n->destroy();
      ++changed;
    }
  }
  return changed;
}

}  // namespace

int normalize_devices(tj::Graph& g) { return fix_block(g.block()); }

}  // namespace t2o
