// MatMul + Add -> Gemm, where Gemm means the same: both MatMul operands 2-D (Gemm has no batch
// dims) and the Add's other operand broadcasts to the product's [M, N] without enlarging it
// (Gemm's C broadcasts one way only).
#include "passes/graph_util.h"
#include "passes/internal.h"

namespace t2o::passes {

int fuse_matmul_add_into_gemm(Model& m, PassContext& ctx) {
  if (ctx.opset() < 7) return 0;
  return for_each_graph(m, [&](Scope& s) {
    Graph& g = s.graph();
    auto u = std::make_unique<Uses>(g);
    int n = 0;
    for (size_t j = 0; j < g.nodes.size(); ++j) {
      const Node& add = g.nodes[j];
      if (removed(add) || !is_onnx(add) || add.op_type != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
      for (size_t side = 0; side < 2; ++side) {
        const std::string& y = add.inputs[side];
        const std::string& c = add.inputs[1 - side];
        int mi = u->producer(y);
        if (mi < 0 || y == c || !u->only_reader(y, j)) continue;
        const Node& mm = g.nodes[static_cast<size_t>(mi)];
        if (!is_onnx(mm) || mm.op_type != "MatMul" || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
        const Type* ta = ctx.type(mm.inputs[0]);
        auto sa = known_shape(ta), sb = known_shape(ctx.type(mm.inputs[1])), sy = known_shape(ctx.type(y));
        auto sc = known_shape(ctx.type(c));
        if (!sa || !sb || !sc || sa->rank() != 2 || sb->rank() != 2 || sc->rank() > 2) continue;
        if (ta->elem != DType::Float && ta->elem != DType::Double) continue;
        const Type* tc = ctx.type(c);
        if (!tc || tc->elem != ta->elem) continue;
        // C's dims (right-aligned to [M, N]) are 1 or the product's own.
        Shape out{{sa->dims[0], sb->dims[1]}};
        bool ok = true;
        for (int k = 0; k < sc->rank(); ++k) {
          const Dim& d = sc->dims[static_cast<size_t>(k)];
          const Dim& o = out.dims[static_cast<size_t>(2 - sc->rank() + k)];
          ok = ok && ((d.is_static() && d.value == 1) || same_dim(d, o));
        }
        if (!ok || !ctx.allow(mm)) continue;
        Node gemm = make_node("Gemm", {mm.inputs[0], mm.inputs[1], c}, {add.outputs[0]}, mm.name, mm.doc_string);
        remove_node(g.nodes[static_cast<size_t>(mi)]);
        g.nodes[j] = std::move(gemm);
        ++n;
        u = std::make_unique<Uses>(g);
        break;
      }
    }
    drop_removed(g);
    return n;
  });
}

}  // namespace t2o::passes
