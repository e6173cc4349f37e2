// Sequence and optional ops. Sequences hold tensors that share storage with their producers;
// every op builds a new vector, so no sequence is ever modified in place.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/kernels/sequence_util.h"
#include "runtime/kernels/util.h"

namespace t2o {
namespace {

const RValue& seq_input(const KernelContext& ctx, int i) {
  const RValue& v = ctx.input_value(i);
  if (!v.is_sequence()) ctx.fail("input " + std::to_string(i) + " must be a sequence");
  return v;
}

// A position input: one integer in [lo, hi] after adding n to negatives.
int64_t position(const KernelContext& ctx, int i, int64_t n, bool allow_end) {
  const Tensor& p = ctx.input(i);
  if (p.numel() != 1 || !dtype_is_integer(p.dtype())) ctx.fail("position must be a single integer");
  int64_t pos = p.as_int(0);
  int64_t hi = allow_end ? n : n - 1;
  if (pos < -n || pos > hi)
    ctx.fail("position " + std::to_string(pos) + " is out of range for a sequence of length " + std::to_string(n));
  return pos < 0 ? pos + n : pos;
}

DType seq_dtype(const RValue& s) { return s.seq_elem != DType::Undefined ? s.seq_elem : DType::Undefined; }

void check_elem(const KernelContext& ctx, const RValue& s, const Tensor& t) {
  DType want = seq_dtype(s);
  if (want != DType::Undefined && want != t.dtype())
    ctx.fail("tensor of type " + std::string(dtype_name(t.dtype())) + " cannot join a sequence of " +
             std::string(dtype_name(want)));
}

void sequence_empty(KernelContext& ctx) {
  DType dt = static_cast<DType>(ctx.node().attr_int("dtype", static_cast<int64_t>(DType::Float)));
  if (!dtype_is_valid(static_cast<int32_t>(dt))) ctx.fail("invalid dtype attribute");
  ctx.set_output(0, RValue::make_sequence({}, dt));
}

void sequence_construct(KernelContext& ctx) {
  std::vector<Tensor> v;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    if (!v.empty() && t.dtype() != v.front().dtype()) ctx.fail("all inputs must have the same element type");
    v.push_back(t);
  }
  if (v.empty()) ctx.fail("SequenceConstruct needs at least one input");
  ctx.set_output(0, RValue::make_sequence(std::move(v)));
}

void sequence_insert(KernelContext& ctx) {
  const RValue& s = seq_input(ctx, 0);
  const Tensor& t = ctx.input(1);
  check_elem(ctx, s, t);
  int64_t n = static_cast<int64_t>(s.sequence.size());
  int64_t pos = ctx.has_input(2) ? position(ctx, 2, n, true) : n;
  std::vector<Tensor> v = s.sequence;
  v.insert(v.begin() + pos, t);
  ctx.set_output(0, RValue::make_sequence(std::move(v), t.dtype()));
}

void sequence_at(KernelContext& ctx) {
  const RValue& s = seq_input(ctx, 0);
  int64_t pos = position(ctx, 1, static_cast<int64_t>(s.sequence.size()), false);
  ctx.set_output(0, RValue(s.sequence[static_cast<size_t>(pos)]));
}

void sequence_erase(KernelContext& ctx) {
  const RValue& s = seq_input(ctx, 0);
  int64_t n = static_cast<int64_t>(s.sequence.size());
  if (n == 0) ctx.fail("cannot erase from an empty sequence");
  int64_t pos = ctx.has_input(1) ? position(ctx, 1, n, false) : n - 1;
  std::vector<Tensor> v = s.sequence;
  v.erase(v.begin() + pos);
  ctx.set_output(0, RValue::make_sequence(std::move(v), s.seq_elem));
}

void sequence_length(KernelContext& ctx) {
  const RValue& s = seq_input(ctx, 0);
  ctx.set_output(0, RValue(Tensor::scalar<int64_t>(static_cast<int64_t>(s.sequence.size()))));
}

void split_to_sequence(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 1) ctx.fail("input must have rank >= 1");
  int64_t axis = kern::norm_axis(ctx, ctx.node().attr_int("axis", 0), x.rank());
  int64_t len = x.dims()[static_cast<size_t>(axis)];
  std::vector<Tensor> parts;
  if (!ctx.has_input(1)) {
    bool keep = ctx.node().attr_int("keepdims", 1) != 0;
    for (int64_t i = 0; i < len; ++i) parts.push_back(keep ? kern::slice_axis(x, axis, i, 1) : kern::take_axis(x, axis, i));
  } else {
    const Tensor& sp = ctx.input(1);
    std::vector<int64_t> sizes;
    if (sp.rank() == 0) {
      int64_t c = sp.as_int(0);
      if (c <= 0) ctx.fail("split must be positive");
      for (int64_t o = 0; o < len; o += c) sizes.push_back(std::min(c, len - o));
    } else if (sp.rank() == 1) {
      sizes = kern::to_int_vector(sp);
      int64_t sum = 0;
      for (int64_t v : sizes) {
        if (v < 0) ctx.fail("split sizes must be non-negative");
        sum += v;
      }
      if (sum != len) ctx.fail("split sizes sum to " + std::to_string(sum) + ", the axis has " + std::to_string(len));
    } else {
      ctx.fail("split must be a scalar or a 1-D tensor");
    }
    int64_t off = 0;
    for (int64_t v : sizes) {
      parts.push_back(kern::slice_axis(x, axis, off, v));
      off += v;
    }
  }
  ctx.set_output(0, RValue::make_sequence(std::move(parts), x.dtype()));
}

void concat_from_sequence(KernelContext& ctx) {
  const RValue& s = seq_input(ctx, 0);
  if (s.sequence.empty()) ctx.fail("cannot concatenate an empty sequence");
  bool new_axis = ctx.node().attr_int("new_axis", 0) != 0;
  if (!ctx.node().has_attr("axis")) ctx.fail("missing attribute 'axis'");
  const Tensor& f = s.sequence.front();
  int rank = f.rank();
  int64_t axis = kern::norm_axis(ctx, ctx.node().attr_int("axis"), new_axis ? rank + 1 : rank);
  if (!new_axis && rank == 0) ctx.fail("cannot concatenate scalars without new_axis");
  for (const Tensor& t : s.sequence) {
    if (t.dtype() != f.dtype() || t.rank() != rank) ctx.fail("sequence elements differ in type or rank");
    for (int d = 0; d < rank; ++d)
      if ((new_axis || d != axis) && t.dim(d) != f.dim(d))
        ctx.fail("sequence elements have incompatible shapes " + dims_to_string(f.dims()) + " and " + dims_to_string(t.dims()));
  }
  ctx.set_output(0, RValue(new_axis ? kern::stack_axis(s.sequence, axis) : kern::concat_axis(s.sequence, axis)));
}

void optional_make(KernelContext& ctx) {
  if (!ctx.has_input(0)) {
    ctx.set_output(0, RValue::make_optional(nullptr));
    return;
  }
  ctx.set_output(0, RValue::make_optional(std::make_shared<RValue>(ctx.input_value(0))));
}

void optional_has_element(KernelContext& ctx) {
  bool has = false;
  if (ctx.has_input(0)) {
    const RValue& v = ctx.input_value(0);
    has = v.is_optional() ? v.element != nullptr : true;
  }
  ctx.set_output(0, RValue(Tensor::scalar<bool>(has)));
}

void optional_get_element(KernelContext& ctx) {
  const RValue& v = ctx.input_value(0);
  if (!v.is_optional()) {
    ctx.set_output(0, v);
    return;
  }
  if (!v.element) ctx.fail("the optional input is empty");
  ctx.set_output(0, *v.element);
}

// Runs the body once per sequence position; tensor inputs are passed unchanged each time.
class SequenceMapKernel : public OpKernel {
 public:
  explicit SequenceMapKernel(const KernelInfo& info) {
    const Graph* g = info.node.attr_graph("body");
    if (!g) throw Error(info.node.describe() + ": missing subgraph attribute 'body'");
    body_ = info.compile_subgraph(*g);
  }
  void run(KernelContext& ctx) override {
    size_t n = seq_input(ctx, 0).sequence.size();
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      const RValue& v = ctx.input_value(i);
      if (v.is_sequence() && v.sequence.size() != n) ctx.fail("input sequences differ in length");
    }
    const Graph& g = body_->graph();
    std::vector<std::vector<Tensor>> outs(g.outputs.size());
    std::vector<RValue> in(static_cast<size_t>(ctx.num_inputs()));
    for (size_t k = 0; k < n; ++k) {
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        const RValue& v = ctx.input_value(i);
        in[static_cast<size_t>(i)] = v.is_sequence() ? RValue(v.sequence[k]) : v;
      }
      std::vector<RValue> r = body_->run(ctx, in);
      if (r.size() != outs.size()) ctx.fail("the body returned an unexpected number of outputs");
      for (size_t j = 0; j < r.size(); ++j) {
        if (!r[j].is_tensor()) ctx.fail("body outputs must be tensors");
        outs[j].push_back(r[j].tensor);
      }
    }
    for (size_t j = 0; j < outs.size(); ++j) {
      const Type& t = g.outputs[j].type;
      ctx.set_output(static_cast<int>(j), RValue::make_sequence(std::move(outs[j]), t.kind == Type::Kind::Tensor ? t.elem : DType::Undefined));
    }
  }

 private:
  std::shared_ptr<SubgraphRunner> body_;
};

}  // namespace

void register_sequence_kernels(KernelRegistry& r) {
  r.add("", "SequenceEmpty", 11, stateless(sequence_empty));
  r.add("", "SequenceConstruct", 11, stateless(sequence_construct));
  r.add("", "SequenceInsert", 11, stateless(sequence_insert));
  r.add("", "SequenceAt", 11, stateless(sequence_at));
  r.add("", "SequenceErase", 11, stateless(sequence_erase));
  r.add("", "SequenceLength", 11, stateless(sequence_length));
  r.add("", "SplitToSequence", 11, stateless(split_to_sequence));
  r.add("", "ConcatFromSequence", 11, stateless(concat_from_sequence));
  r.add("", "SequenceMap", 17, factory_of<SequenceMapKernel>());
  r.add("", "Optional", 15, stateless(optional_make));
  r.add("", "OptionalHasElement", 15, stateless(optional_has_element));
  r.add("", "OptionalHasElement", 18, stateless(optional_has_element));  // accepts plain tensors/sequences
  r.add("", "OptionalGetElement", 15, stateless(optional_get_element));
  r.add("", "OptionalGetElement", 18, stateless(optional_get_element));
}

}  // namespace t2o
