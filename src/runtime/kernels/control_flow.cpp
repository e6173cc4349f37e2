// Control flow: If, Loop, Scan. Bodies are compiled once at build; each run binds the body's
// formal inputs in order, and the body reads enclosing-scope values by name through the context.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/kernels/sequence_util.h"
#include "runtime/kernels/util.h"

namespace t2o {
namespace {

const Graph& graph_attr(const Node& n, const char* name) {
  const Graph* g = n.attr_graph(name);
  if (!g) throw Error(n.describe() + ": missing subgraph attribute '" + std::string(name) + "'");
  return *g;
}

// An empty tensor standing for a scan output of a loop that ran zero times: [0, dims of the
// body output when they are static].
Tensor empty_scan_output(const ValueInfo& vi) {
  DType dt = vi.type.elem == DType::Undefined ? DType::Float : vi.type.elem;
  Dims d{0};
  if (vi.type.shape)
    for (const Dim& x : vi.type.shape->dims) d.push_back(x.is_static() ? x.value : 0);
  return Tensor(dt, d);
}

// A Loop's scan output, stacked as iterations produce it: one buffer that doubles when full (so a
// long loop costs amortised copies and one allocation, counted against the memory limit, instead
// of a tensor per iteration). Strings keep their tensors and are stacked at the end.
class ScanStack {
 public:
  void push(const KernelContext& ctx, const Tensor& t, int k) {
    if (count_ > 0 && t.dims() != elem_)
      ctx.fail("scan output " + std::to_string(k) + " changes shape from " + dims_to_string(elem_) + " to " +
               dims_to_string(t.dims()) + " between iterations");
    if (count_ == 0) elem_ = t.dims(), dtype_ = t.dtype();
    if (t.dtype() == DType::String) {
      parts_.push_back(t);
      ++count_;
      return;
    }
    size_t each = t.nbytes();
    if (count_ == capacity_) {
      int64_t cap = std::max<int64_t>(4, capacity_ * 2);
      Dims d{cap};
      d.insert(d.end(), elem_.begin(), elem_.end());
      Tensor grown(dtype_, d);
      if (count_ > 0) std::memcpy(grown.raw(), store_.raw(), each * static_cast<size_t>(count_));
      store_ = std::move(grown);
      capacity_ = cap;
    }
    if (each) std::memcpy(static_cast<char*>(store_.raw()) + each * static_cast<size_t>(count_), t.raw(), each);
    ++count_;
  }
  bool empty() const { return count_ == 0; }
  Tensor take() {
    if (dtype_ == DType::String) return kern::stack_axis(parts_, 0);
    Dims d{count_};
    d.insert(d.end(), elem_.begin(), elem_.end());
    if (count_ == capacity_) return Tensor(store_).reshaped(d);
    Tensor out(dtype_, d);
    if (out.nbytes()) std::memcpy(out.raw(), store_.raw(), out.nbytes());
    return out;
  }

 private:
  Dims elem_;
  DType dtype_ = DType::Float;
  int64_t count_ = 0, capacity_ = 0;
  Tensor store_;
  std::vector<Tensor> parts_;
};

const Tensor& tensor_of(const KernelContext& ctx, const RValue& v, const std::string& what) {
  if (!v.is_tensor()) ctx.fail(what + " must be a tensor");
  return v.tensor;
}

class IfKernel : public OpKernel {
 public:
  explicit IfKernel(const KernelInfo& info)
      : then_(info.compile_subgraph(graph_attr(info.node, "then_branch"))),
        else_(info.compile_subgraph(graph_attr(info.node, "else_branch"))) {}
  void run(KernelContext& ctx) override {
    bool c = kern::scalar_bool(ctx, ctx.input(0), "cond");
    SubgraphRunner& br = c ? *then_ : *else_;
    std::vector<RValue> outs = br.run(ctx, {});
    if (static_cast<int>(outs.size()) < ctx.num_outputs())
      ctx.fail("the " + std::string(c ? "then" : "else") + " branch yields " + std::to_string(outs.size()) +
               " outputs, the node expects " + std::to_string(ctx.num_outputs()));
    for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, std::move(outs[static_cast<size_t>(i)]));
  }

 private:
  std::shared_ptr<SubgraphRunner> then_, else_;
};

class LoopKernel : public OpKernel {
 public:
  explicit LoopKernel(const KernelInfo& info) : body_(info.compile_subgraph(graph_attr(info.node, "body"))) {}
  void run(KernelContext& ctx) override {
    const Graph& g = body_->graph();
    int n_carried = ctx.num_inputs() - 2;
    if (n_carried < 0) ctx.fail("Loop needs inputs M and cond (possibly empty)");
    int n_scan = static_cast<int>(g.outputs.size()) - 1 - n_carried;
    if (n_scan < 0) ctx.fail("the body has too few outputs for " + std::to_string(n_carried) + " loop-carried values");
    int64_t max_trips = std::numeric_limits<int64_t>::max();
    if (ctx.has_input(0)) {
      const Tensor& m = ctx.input(0);
      if (m.numel() < 1) ctx.fail("M must hold one element");
      max_trips = m.as_int(0);
    }
    bool cond = ctx.has_input(1) ? kern::scalar_bool(ctx, ctx.input(1), "cond") : true;
    std::vector<RValue> carried;
    for (int i = 0; i < n_carried; ++i) carried.push_back(ctx.has_input(i + 2) ? ctx.input_value(i + 2) : RValue());
    std::vector<ScanStack> scans(static_cast<size_t>(n_scan));
    std::vector<RValue> in(static_cast<size_t>(2 + n_carried));
    for (int64_t it = 0; it < max_trips && cond; ++it) {
      in[0] = RValue(Tensor::scalar<int64_t>(it));
      in[1] = RValue(Tensor::scalar<bool>(cond));
      for (int i = 0; i < n_carried; ++i) in[static_cast<size_t>(2 + i)] = std::move(carried[static_cast<size_t>(i)]);
      std::vector<RValue> outs = body_->run(ctx, in);
      if (outs.size() != g.outputs.size()) ctx.fail("the body returned an unexpected number of outputs");
      cond = kern::scalar_bool(ctx, tensor_of(ctx, outs[0], "the body's condition output"), "the body's condition");
      for (int i = 0; i < n_carried; ++i) carried[static_cast<size_t>(i)] = std::move(outs[static_cast<size_t>(1 + i)]);
      for (int k = 0; k < n_scan; ++k) {
        const Tensor& t = tensor_of(ctx, outs[static_cast<size_t>(1 + n_carried + k)], "scan output " + std::to_string(k));
        scans[static_cast<size_t>(k)].push(ctx, t, k);
      }
    }
    for (int i = 0; i < n_carried; ++i) ctx.set_output(i, std::move(carried[static_cast<size_t>(i)]));
    for (int k = 0; k < n_scan; ++k) {
      auto& acc = scans[static_cast<size_t>(k)];
      ctx.set_output(n_carried + k, acc.empty() ? empty_scan_output(g.outputs[static_cast<size_t>(1 + n_carried + k)])
                                                : acc.take());
    }
  }

 private:
  std::shared_ptr<SubgraphRunner> body_;
};

// Scan, opset 9 and later (no batch axis), and opset 8 (batch axis 0, optional sequence_lens).
class ScanKernel : public OpKernel {
 public:
  explicit ScanKernel(const KernelInfo& info) : body_(info.compile_subgraph(graph_attr(info.node, "body"))) {
    const Node& n = info.node;
    v8_ = info.opset < 9;
    m_ = n.attr_int("num_scan_inputs", -1);
    if (m_ < 1) throw Error(n.describe() + ": num_scan_inputs must be at least 1");
    in_axes_ = n.attr_ints("scan_input_axes");
    in_dirs_ = n.attr_ints(v8_ ? "directions" : "scan_input_directions");
    out_axes_ = n.attr_ints("scan_output_axes");
    out_dirs_ = n.attr_ints("scan_output_directions");
  }

  void run(KernelContext& ctx) override {
    int first = v8_ ? 1 : 0;
    int n_state = ctx.num_inputs() - first - static_cast<int>(m_);
    if (n_state < 0) ctx.fail("fewer inputs than num_scan_inputs");
    int n_out = static_cast<int>(body_->graph().outputs.size()) - n_state;
    if (n_out < 0) ctx.fail("the body has fewer outputs than state variables");
    std::vector<RValue> states;
    std::vector<Tensor> xs;
    for (int i = 0; i < n_state; ++i) states.push_back(ctx.input_value(first + i));
    for (int j = 0; j < m_; ++j) xs.push_back(ctx.input(first + n_state + j));
    if (!v8_) {
      std::vector<RValue> outs = scan(ctx, states, xs, n_out);
      for (size_t i = 0; i < outs.size(); ++i) ctx.set_output(static_cast<int>(i), std::move(outs[i]));
      return;
    }
    // Opset 8: run each batch row separately, then stack rows (scan outputs padded to the longest).
    for (const RValue& s : states)
      if (!s.is_tensor() || s.tensor.rank() < 1) ctx.fail("opset-8 Scan states need a batch axis");
    for (const Tensor& x : xs)
      if (x.rank() < 2) ctx.fail("opset-8 Scan inputs need batch and sequence axes");
    int64_t batch = xs[0].dim(0);
    std::vector<int64_t> lens(static_cast<size_t>(batch), xs[0].dim(1));
    if (ctx.has_input(0)) {
      lens = kern::to_int_vector(ctx.input(0));
      if (static_cast<int64_t>(lens.size()) != batch) ctx.fail("sequence_lens must have one entry per batch row");
    }
    std::vector<std::vector<Tensor>> rows(static_cast<size_t>(n_state + n_out));
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<RValue> st;
      for (const RValue& s : states) {
        if (s.tensor.dim(0) != batch) ctx.fail("state batch size differs from the scan inputs'");
        st.emplace_back(kern::take_axis(s.tensor, 0, b));
      }
      std::vector<Tensor> xb;
      int64_t len = lens[static_cast<size_t>(b)];
      for (const Tensor& x : xs) {
        if (x.dim(0) != batch) ctx.fail("scan inputs disagree on the batch size");
        if (len < 0 || len > x.dim(1)) ctx.fail("sequence_lens entry out of range");
        xb.push_back(kern::slice_axis(kern::take_axis(x, 0, b), 0, 0, len));
      }
      std::vector<RValue> outs = scan(ctx, st, xb, n_out);
      for (size_t i = 0; i < outs.size(); ++i) rows[i].push_back(outs[i].tensor);
    }
    int64_t max_len = xs[0].dim(1);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (static_cast<int>(i) >= n_state)
        for (Tensor& t : rows[i])
          if (t.rank() >= 1 && t.dim(0) < max_len) {
            Dims pd = t.dims();
            pd[0] = max_len - t.dim(0);
            t = kern::concat_axis({t, Tensor(t.dtype(), pd)}, 0);
          }
      for (const Tensor& t : rows[i])
        if (t.dims() != rows[i].front().dims()) ctx.fail("per-batch outputs differ in shape");
      ctx.set_output(static_cast<int>(i), kern::stack_axis(rows[i], 0));
    }
  }

 private:
  std::vector<RValue> scan(KernelContext& ctx, std::vector<RValue> states, const std::vector<Tensor>& xs, int n_out) {
    int64_t len = -1;
    std::vector<int64_t> axes(xs.size());
    for (size_t j = 0; j < xs.size(); ++j) {
      int64_t ax = j < in_axes_.size() && !v8_ ? in_axes_[j] : 0;
      axes[j] = kern::norm_axis(ctx, ax, xs[j].rank());
      if (xs[j].rank() < 1) ctx.fail("scan inputs must have rank >= 1");
      int64_t l = xs[j].dims()[static_cast<size_t>(axes[j])];
      if (len >= 0 && l != len) ctx.fail("scan inputs disagree on the sequence length");
      len = l;
    }
    size_t n_state = states.size();
    std::vector<std::vector<Tensor>> outs(static_cast<size_t>(n_out));
    std::vector<RValue> in(n_state + xs.size());
    for (int64_t t = 0; t < len; ++t) {
      for (size_t i = 0; i < n_state; ++i) in[i] = std::move(states[i]);
      for (size_t j = 0; j < xs.size(); ++j) {
        bool rev = j < in_dirs_.size() && in_dirs_[j] != 0;
        in[n_state + j] = RValue(kern::take_axis(xs[j], axes[j], rev ? len - 1 - t : t));
      }
      std::vector<RValue> r = body_->run(ctx, in);
      if (r.size() != n_state + static_cast<size_t>(n_out)) ctx.fail("the body returned an unexpected number of outputs");
      for (size_t i = 0; i < n_state; ++i) states[i] = std::move(r[i]);
      for (int k = 0; k < n_out; ++k) {
        const Tensor& y = tensor_of(ctx, r[n_state + static_cast<size_t>(k)], "scan output");
        auto& acc = outs[static_cast<size_t>(k)];
        if (!acc.empty() && acc.front().dims() != y.dims()) ctx.fail("scan output changes shape between iterations");
        acc.push_back(y);
      }
    }
    std::vector<RValue> res(states.begin(), states.end());
    const Graph& g = body_->graph();
    for (int k = 0; k < n_out; ++k) {
      auto& acc = outs[static_cast<size_t>(k)];
      const ValueInfo& vi = g.outputs[n_state + static_cast<size_t>(k)];
      if (acc.empty()) {
        res.emplace_back(empty_scan_output(vi));
        continue;
      }
      if (k < static_cast<int>(out_dirs_.size()) && out_dirs_[static_cast<size_t>(k)] != 0)
        std::reverse(acc.begin(), acc.end());
      int64_t ax = k < static_cast<int>(out_axes_.size()) && !v8_ ? out_axes_[static_cast<size_t>(k)] : 0;
      ax = kern::norm_axis(ctx, ax, acc.front().rank() + 1);
      res.emplace_back(kern::stack_axis(acc, ax));
    }
    return res;
  }

  std::shared_ptr<SubgraphRunner> body_;
  bool v8_ = false;
  int64_t m_ = 0;
  std::vector<int64_t> in_axes_, in_dirs_, out_axes_, out_dirs_;
};

}  // namespace

void register_control_flow_kernels(KernelRegistry& r) {
  r.add("", "If", 1, factory_of<IfKernel>());
  r.add("", "If", 11, factory_of<IfKernel>());  // 13: sequences, 16: optionals — values pass through
  r.add("", "Loop", 1, factory_of<LoopKernel>());
  r.add("", "Loop", 11, factory_of<LoopKernel>());
  r.add("", "Scan", 8, factory_of<ScanKernel>());
  r.add("", "Scan", 9, factory_of<ScanKernel>());
}

}  // namespace t2o
