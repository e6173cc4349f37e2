// Convolutions: Conv, ConvTranspose, ConvInteger, QLinearConv. Plain reference loops for every
// dtype and attribute combination; f32 Conv/ConvTranspose go through oneDNN when fast paths are on.
#include <cmath>
#include <limits>
#include <mutex>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/conv_depthwise.h"
#include "runtime/kernels/conv_dnnl.h"
#include "runtime/kernels/conv_ref.h"
#include "runtime/kernels/conv_winograd.h"
#include "runtime/kernels/util.h"
#include "runtime/optimize.h"

namespace t2o {

namespace {

using kern::Geom;
using kern::WindowAttrs;

Dims spatial(const Dims& d) { return Dims(d.begin() + 2, d.end()); }

// Converts the float-family tensors to a common compute type T (float for f16/bf16/f32, double
// for f64), runs f on raw pointers and writes the result back.
template <typename F>
void with_float_buffers(const KernelContext& ctx, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, F&& f) {
  DType dt = x.dtype();
  if (w.dtype() != dt || (b && b->dtype() != dt))
    ctx.fail("X, W and B must have the same element type (got " + std::string(dtype_name(dt)) + ", " +
             std::string(dtype_name(w.dtype())) + (b ? ", " + std::string(dtype_name(b->dtype())) : "") + ")");
  if (dt == DType::Float) return f(x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr, y.data<float>());
  if (dt == DType::Double) return f(x.data<double>(), w.data<double>(), b ? b->data<double>() : nullptr, y.data<double>());
  if (dt != DType::Float16 && dt != DType::BFloat16) ctx.fail("unsupported element type " + std::string(dtype_name(dt)));
  auto conv = [](const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = static_cast<float>(t.as_double(i));
    return v;
  };
  std::vector<float> xf = conv(x), wf = conv(w), bf = b ? conv(*b) : std::vector<float>{};
  std::vector<float> yf(static_cast<size_t>(y.numel()));
  f(xf.data(), wf.data(), b ? bf.data() : nullptr, yf.data());
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      T* p = y.data<T>();
      for (size_t i = 0; i < yf.size(); ++i) p[i] = T(yf[i]);
    }
  });
}

// Shape checks shared by the conv ops; returns the geometry and fills N, C, M.
struct ConvShape {
  int64_t n, c, m;
  Geom g;
};

ConvShape conv_shape(const KernelContext& ctx, const WindowAttrs& a, int64_t group, const Tensor& xt, const Tensor& w,
                     const Dims* logical_x = nullptr) {
  struct {
    const Dims& d;
    int rank() const { return static_cast<int>(d.size()); }
    int64_t dim(int i) const { return d[static_cast<size_t>(i)]; }
    const Dims& dims() const { return d; }
  } x{logical_x ? *logical_x : xt.dims()};
  if (x.rank() < 3) ctx.fail("X must have rank >= 3 (N x C x spatial), got " + dims_to_string(x.dims()));
  if (w.rank() != x.rank())
    ctx.fail("W must have the rank of X, got " + dims_to_string(w.dims()) + " for X " + dims_to_string(x.dims()));
  if (x.rank() > 5) ctx.fail("only 1, 2 and 3 spatial dimensions are supported");
  if (group < 1) ctx.fail("group must be positive");
  ConvShape s{x.dim(0), x.dim(1), w.dim(0), {}};
  if (s.c != w.dim(1) * group)
    ctx.fail("X has " + std::to_string(s.c) + " channels but W " + dims_to_string(w.dims()) + " with group " +
             std::to_string(group) + " expects " + std::to_string(w.dim(1) * group));
  if (s.m % group != 0) ctx.fail("W's output channels must be divisible by group");
  Dims k = spatial(w.dims());
  if (!a.kernel.empty() && a.kernel != k)
    ctx.fail("kernel_shape does not match W " + dims_to_string(w.dims()));
  s.g = kern::forward_geom(ctx.node(), a, spatial(x.dims()), k);
  return s;
}

void check_bias(const KernelContext& ctx, const Tensor* b, int64_t m) {
  if (b && (b->rank() != 1 || b->dim(0) != m))
    ctx.fail("B must have shape [" + std::to_string(m) + "], got " + dims_to_string(b->dims()));
}

// A plausible input for prepacking at build time, when only the weight's shape is known.
Geom probe_geom(const Node& node, const WindowAttrs& a, const Dims& k) {
  Dims in(k.size());
  // A dilations list of the wrong length is forward_geom's to report.
  Dims dil = a.dilations.size() == k.size() ? a.dilations : Dims(k.size(), 1);
  for (size_t i = 0; i < k.size(); ++i) in[i] = std::max<int64_t>(32, (k[i] - 1) * dil[i] + 1);
  return kern::forward_geom(node, a, in, k);
}

// A blocked activation as plain NCHW with `c` channels (for the reference path).
Tensor plain_of(const Tensor& t, int64_t blk, int64_t c) {
  if (!blk) return t;
  Tensor p(DType::Float, kern::logical_dims(t.dims(), c));
  kern::to_plain(t, p);
  return p;
}

T2O_AVX512_WARNINGS_OFF

// Relu / Clip / Sum steps over runs of 16 values blocked by 16 (`planes` runs per block, `Cb`
// blocks, M real channels: the last block's lanes past M are left at zero), NaN kept.
T2O_AVX512 void finish_blocked16(float* y, const float* r, int64_t first, int64_t last, int64_t planes, int64_t Cb,
                                 int64_t M, const kern::ConvPostOp* ops, size_t n) {
  const __mmask16 tail = M % 16 ? static_cast<__mmask16>((1u << (M % 16)) - 1) : 0xFFFF;
  for (int64_t j = first; j < last; ++j) {
    const __mmask16 mask = (j / planes) % Cb == Cb - 1 ? tail : 0xFFFF;
    __m512 v = _mm512_maskz_loadu_ps(mask, y + j * 16);
    for (size_t k = 0; k < n; ++k) {
      const kern::ConvPostOp& op = ops[k];
      if (op.kind == kern::ConvPostOp::Kind::Sum) {
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, r + j * 16));
      } else if (op.kind == kern::ConvPostOp::Kind::Clip) {
        v = kern::clamp512(v, _mm512_set1_ps(op.alpha), _mm512_set1_ps(op.beta));
      } else if (op.alpha == 0.0f) {  // Relu: max(x, 0), NaN kept, -inf to 0
        v = kern::relu512(v);
      } else {  // leaky Relu: x < 0 ? slope * x : x (NaN is not below zero)
        const __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
        v = _mm512_mask_mul_ps(v, neg, v, _mm512_set1_ps(op.alpha));
      }
    }
    _mm512_storeu_ps(y + j * 16, _mm512_maskz_mov_ps(mask, v));
  }
}

T2O_AVX512_WARNINGS_ON

// Conv, and FusedConv (Conv + post-ops, activations possibly channel-blocked; see optimize.h).
class ConvKernel : public OpKernel {
 public:
  explicit ConvKernel(const KernelInfo& info)
      : attrs_(WindowAttrs::from_node(info.node)), group_(info.node.attr_int("group", 1)),
        post_(kern::conv_post_ops(info.node)), src_blk_(info.node.attr_int("src_block", 0)),
        dst_blk_(info.node.attr_int("dst_block", 0)), res_blk_(info.node.attr_int("res_block", 0)),
        keep_nan_(info.node.attr_int("keep_nan", 0) != 0), nonfinite_in_(info.node.attr_int("nonfinite_in", 0) != 0) {
    attrs_.ceil_mode = false;
    for (const kern::ConvPostOp& p : post_) drops_nan_ |= drops_nan(p);
    for (int64_t b : {src_blk_, dst_blk_, res_blk_})
      if (b != 0 && b != 8 && b != 16) throw Error(info.node.describe() + ": block sizes must be 0, 8 or 16");
    if (!info.fast_paths) {
      if (src_blk_ || dst_blk_ || res_blk_) throw Error(info.node.describe() + ": blocked layouts need fast paths");
      return;
    }
    // A conv NaN may reach from inside the model (keep_nan): oneDNN computes the post-ops before
    // the first Relu-0 / Clip, the rest run after it in a NaN-keeping pass (finish_exact).
    split_ = post_.size();
    if (keep_nan_ && drops_nan_) {
      split_ = 0;
      while (!drops_nan(post_[split_])) ++split_;
    }
    dnnl_ = std::make_unique<kern::DnnlConv>(
        false, group_, std::vector<kern::ConvPostOp>(post_.begin(), post_.begin() + static_cast<long>(split_)));
    dnnl_->set_layout(src_blk_, dst_blk_, res_blk_);
    const Tensor* w = info.constant_input(1);
    // A run-time bias is passed at each run; only the weight must be constant to prepack.
    const Tensor* b = info.node.has_input(2) ? info.constant_input(2) : nullptr;
    if (b && b->dtype() != DType::Float) b = nullptr;
    // 3x3 convolutions with constant weights (and bias) may run as Winograd F(2x2, 3x3); its
    // weights are made at the first run that takes it (not for maps too small to pay).
    if (w && group_ == 1 && (!info.node.has_input(2) || b) && kern::channel_block() == 16 &&
        kern::WinogradConv::qualifies(*w, b, post_)) {
      const_w_ = *w;
      if (b) const_b_ = *b;
    }
    if (w && (!info.node.has_input(2) || b) && kern::channel_block() == 16 &&
        kern::DepthwiseConv::qualifies(*w, b, group_, post_))
      dw_ = kern::DepthwiseConv::make(*w, b, post_);
    if (w && w->dtype() == DType::Float && w->rank() >= 3 && group_ >= 1 && w->dim(0) % group_ == 0) {
      try {
        dnnl_->prepack(*w, b, w->dim(1) * group_, probe_geom(info.node, attrs_, spatial(w->dims())));
      } catch (const Error&) {
        // Inconsistent attributes: reported with context at run time.
      }
    }
  }

  // The weights as given need not stay once oneDNN holds them packed; not for a conv that may go
  // Winograd (its transform is made from them at the first run).
  bool can_release_constant(int i) const override {
    return i == 1 && dnnl_ && !const_w_.defined() && dnnl_->can_release();
  }
  void release_constant(int i, const Tensor& placeholder) override {
    if (i == 1 && dnnl_) dnnl_->release(placeholder);
  }
  Tensor restore_constant(int i) override { return i == 1 && dnnl_ ? dnnl_->plain_weights() : Tensor(); }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);  // a placeholder without data once released (oneDNN runs packed)
    const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    const Tensor* r = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    Dims xd = x.dims();
    if (src_blk_) {
      if (w.rank() != 4) ctx.fail("a blocked input needs a 2-d conv");
      xd = kern::logical_dims(x.dims(), w.dim(1) * group_);
    }
    ConvShape s = conv_shape(ctx, attrs_, group_, x, w, &xd);
    check_bias(ctx, b, s.m);
    Dims yd{s.n, s.m};
    yd.insert(yd.end(), s.g.out.begin(), s.g.out.end());
    bool fast = dnnl_ && x.dtype() == DType::Float && w.dtype() == DType::Float && (!b || b->dtype() == DType::Float);
    Dims phys = dst_blk_ ? kern::blocked_dims(yd, dst_blk_) : yd;
    // Winograd's transforms spread a NaN or an infinity over a whole tile (inf - inf): not for
    // runs whose inputs hold one, nor for convs the model may feed one (nonfinite_in).
    const int wino = fast && !nonfinite_in_ && !ctx.nonfinite_inputs() ? winograd_takes(x, w, s, yd, r) : 0;
    // oneDNN computes a fused Relu or Clip with max / min, which turn a NaN into 0 or a bound
    // (PyTorch and the reference keep it). When NaN may reach this conv: with keep_nan, oneDNN
    // runs the chain before the first of them and finish_exact the rest; in other runs whose
    // inputs hold a NaN, oneDNN runs the bare conv and the post-ops run as written.
    const bool exact = fast && drops_nan_ && (keep_nan_ || ctx.nonfinite_inputs());
    // A residual that dies here becomes the output: the sum post-op then reads it in place instead
    // of from a copy (oneDNN's sum adds what dst holds).
    // With keep_nan, oneDNN runs the head of the chain and the rest follows over y.
    const bool split = fast && split_ < post_.size() && finish_exact_ok(r, phys);
    if (!wino && fast && (!exact || (split && !sum_after_split())) && r && r->dtype() == DType::Float && r->dims() == phys && res_blk_ == dst_blk_ && r->numel() > 0 &&
        ctx.input_reusable(3)) {
      Tensor yt = *r;
      ctx.set_output(0, RValue(yt));
      if (dnnl_->run(x, w, b, s.g, yt, r)) {  // on false nothing was written
        if (split) finish_exact(ctx, yt, r, yd);
        return;
      }
    }
    // Every element is written by the conv, so the output need not be zeroed first.
    Tensor& y = ctx.allocate_output_uninit(0, x.dtype(), phys);
    if (y.numel() == 0 && post_.empty()) return;
    if (wino && y.numel() > 0 && run_winograd(ctx, x, xd, s, yd, y, r, wino)) return;
    if (dw_ && fast && src_blk_ == 16 && dst_blk_ == 16 && y.numel() > 0 && dw_->takes(s.g)) {
      const double us = kern::work_us(2.0 * static_cast<double>(dw_->taps() * y.numel()),
                                      4.0 * static_cast<double>(x.numel() + y.numel()));
      dw_->run(x.data<float>(), xd[0], xd[2], xd[3], y.data<float>(), yd[2], yd[3], s.g.stride[0],
               kern::task_threads_for(ctx.threads(), us));
      return;
    }
    if (fast && (!exact || split) && y.numel() > 0 && dnnl_->run(x, w, b, s.g, y, r)) {
      if (split) finish_exact(ctx, y, r, yd);
      return;
    }
    // Reference path: plain tensors in and out, converted when the neighbours are blocked; released
    // weights rebuilt from the packed copy.
    const Tensor wp = dnnl_ && !w.raw() && w.numel() > 0 ? dnnl_->plain_weights() : w;
    Tensor xp = plain_of(x, src_blk_, xd[1]);
    Tensor yp = dst_blk_ ? Tensor(x.dtype(), yd) : y;
    size_t head_ran = 0;  // the conv (1) and this many post-ops ran on oneDNN, plus one
    if (fast && yp.numel() > 0 && exact) {
      std::call_once(bare_once_, [this] {
        bare_ = std::make_unique<kern::DnnlConv>(false, group_);
        bare_->set_layout(src_blk_, 0, 0);
      });
      head_ran = bare_->run(x, wp, b, s.g, yp) ? 1 : 0;
    } else if (fast && yp.numel() > 0 && head_len() < post_.size()) {
      // What oneDNN refused is most likely the sum (a residual that broadcasts, e.g. a bias-like
      // Add): keep the conv and the post-ops before the sum on oneDNN, do the rest plainly.
      std::call_once(head_once_, [this] {
        head_ = std::make_unique<kern::DnnlConv>(
            false, group_, std::vector<kern::ConvPostOp>(post_.begin(), post_.begin() + static_cast<long>(head_len())));
        head_->set_layout(src_blk_, 0, 0);
      });
      head_ran = head_->run(x, wp, b, s.g, yp) ? 1 + head_len() : 0;
    }
    if (!head_ran) {
      Geom g3 = s.g.as_3d();
      with_float_buffers(ctx, xp, wp, b, yp, [&](const auto* xq, const auto* wq, const auto* bq, auto* yq) {
        kern::conv_ref(xq, wq, bq, yq, s.n, s.c, s.m, group_, g3, ctx.threads());
      });
    }
    if (!post_.empty()) {
      if (x.dtype() != DType::Float) ctx.fail("fused post-ops need f32, got " + std::string(dtype_name(x.dtype())));
      Tensor rp = r && res_blk_ ? plain_of(*r, res_blk_, s.m) : Tensor();
      yp = kern::apply_post_ops_ref(ctx, post_, yp, r && res_blk_ ? &rp : r, head_ran ? head_ran - 1 : 0);
    }
    if (dst_blk_) {
      kern::to_blocked(yp, ctx.allocate_output_uninit(0, DType::Float, kern::blocked_dims(yp.dims(), dst_blk_)));
    } else if (!yp.same_storage(y)) {
      ctx.set_output(0, RValue(yp));
    }
  }

 private:
  WindowAttrs attrs_;
  int64_t group_;
  std::vector<kern::ConvPostOp> post_;
  int64_t src_blk_, dst_blk_, res_blk_;
  std::unique_ptr<kern::DnnlConv> dnnl_;
  std::unique_ptr<kern::DnnlConv> head_;  // the conv and post-ops before the sum, built on demand
  std::unique_ptr<kern::WinogradConv> wino_;  // made at the first run that takes it
  std::unique_ptr<kern::DepthwiseConv> dw_;   // a depthwise 3x3 conv's own kernel (constant weights)
  std::once_flag wino_once_;
  Tensor const_w_, const_b_;  // constant weights (and bias) of a conv that qualifies for Winograd
  std::once_flag head_once_;              // runs on several threads may reach it at once
  std::unique_ptr<kern::DnnlConv> bare_;  // the conv without post-ops, for runs that keep NaN
  std::once_flag bare_once_;
  bool keep_nan_;          // the model may make NaN before this conv (optimize.h)
  bool nonfinite_in_;      // ... or NaN / infinity in any of its inputs (optimize.h)
  bool drops_nan_ = false;  // a post-op oneDNN computes with max / min
  size_t split_ = 0;        // oneDNN computes post_[0, split_), finish_exact the rest

  static bool drops_nan(const kern::ConvPostOp& p) {
    return p.kind == kern::ConvPostOp::Kind::Clip || (p.kind == kern::ConvPostOp::Kind::Relu && p.alpha == 0);
  }
  bool sum_after_split() const {
    for (size_t i = split_; i < post_.size(); ++i)
      if (post_[i].kind == kern::ConvPostOp::Kind::Sum) return true;
    return false;
  }
  // The rest of the chain can run over y: a residual it adds is laid out as y.
  bool finish_exact_ok(const Tensor* r, const Dims& phys) const {
    return !sum_after_split() || (r && r->dtype() == DType::Float && r->dims() == phys && res_blk_ == dst_blk_);
  }
  // post_[split_, end) over y (plain, or blocked with channels past M left at zero), NaN kept:
  // runs of `blk` values (a pixel's block) or of the whole row, each op over the run in turn.
  void finish_exact(const KernelContext& ctx, Tensor& y, const Tensor* r, const Dims& yd) const {
    const int64_t blk = dst_blk_, M = yd[1];
    const int64_t run = blk ? blk : yd.size() > 2 ? y.numel() / (yd[0] * yd[1]) : 1;
    const int64_t runs = y.numel() / std::max<int64_t>(1, run);
    const int64_t plane = blk ? y.numel() / (y.dim(0) * y.dim(1) * blk) : 1, Cb = blk ? y.dim(1) : 1;
    float* yp = y.data<float>();
    const float* rp = r ? r->data<float>() : nullptr;
    bool simple = blk == 16;  // blocks of 16 only with AVX-512 (kern::channel_block)
    for (size_t k = split_; k < post_.size(); ++k)
      simple &= post_[k].kind == kern::ConvPostOp::Kind::Sum || post_[k].kind == kern::ConvPostOp::Kind::Clip ||
                post_[k].kind == kern::ConvPostOp::Kind::Relu;
    if (simple) {
      kern::parallel_for(runs, ctx.threads(), 256, [&](int64_t b0, int64_t e0) {
        finish_blocked16(yp, rp, b0, e0, plane, Cb, M, post_.data() + split_, post_.size() - split_);
      });
      return;
    }
    kern::parallel_for(runs, ctx.threads(), std::max<int64_t>(1, 4096 / run), [&](int64_t b0, int64_t e0) {
      for (int64_t j = b0; j < e0; ++j) {
        // Real channels of this run: all, or those of its block below M.
        const int64_t len = blk ? std::min<int64_t>(blk, M - (j / plane % Cb) * blk) : run;
        float* v = yp + j * run;
        const float* rv = rp ? rp + j * run : nullptr;
        for (size_t k = split_; k < post_.size(); ++k) {
          const kern::ConvPostOp& op = post_[k];
          if (op.kind == kern::ConvPostOp::Kind::Sum) {
            for (int64_t i = 0; i < len; ++i) v[i] += rv[i];
          } else if (op.kind == kern::ConvPostOp::Kind::Clip) {
            // Comparisons are false for NaN: it stays.
            for (int64_t i = 0; i < len; ++i) v[i] = v[i] < op.alpha ? op.alpha : v[i] > op.beta ? op.beta : v[i];
          } else if (op.kind == kern::ConvPostOp::Kind::Relu) {
            // A slope of 0 gives 0 for -inf too (not 0 * -inf).
            for (int64_t i = 0; i < len; ++i) v[i] = v[i] < 0 ? (op.alpha == 0 ? 0.0f : op.alpha * v[i]) : v[i];
          } else {
            for (int64_t i = 0; i < len; ++i) v[i] = op.apply(v[i]);
          }
        }
      }
    });
  }

  // Whether this run goes to Winograd: its constant weights, a geometry it takes, activations
  // blocked by 16 or plain, and a residual of the output's own dims.
  int winograd_takes(const Tensor& x, const Tensor& w, const ConvShape& s, const Dims& yd, const Tensor* r) const {
    if (!const_w_.defined() || !w.same_storage(const_w_) || s.g.nsp != 2 || x.numel() == 0) return 0;
    if (src_blk_ == 8 || dst_blk_ == 8 || res_blk_ == 8) return 0;
    if (r && (r->dtype() != DType::Float || r->dims() != (res_blk_ ? kern::blocked_dims(yd, 16) : yd))) return 0;
    return kern::WinogradConv::takes(s.g.stride, s.g.dil, {s.g.pb[0], s.g.pb[1], s.g.pe[0], s.g.pe[1]}, s.g.out[0],
                                     s.g.out[1]);
  }

  // Winograd over blocked activations: plain inputs, residual and output go through blocked
  // copies. False when oneDNN refused (y is then rewritten by the other paths). The tile size is
  // the first such run's choice (any computes every geometry Winograd takes).
  bool run_winograd(KernelContext& ctx, const Tensor& x, const Dims& xd, const ConvShape& s, const Dims& yd, Tensor& y,
                    const Tensor* r, int tile) {
    const int64_t tiles = xd[0] * ((yd[2] + tile - 1) / tile) * ((yd[3] + tile - 1) / tile);
    std::call_once(wino_once_, [this, tile, tiles] {
      // The direct convolution's packed weights go first (packed again should a run need them),
      // and their pages back to the system (heap chunks this size outlive a free otherwise), so
      // that they never coexist with the transformed ones.
      dnnl_->drop_packed();
#ifdef __GLIBC__
      malloc_trim(0);
#endif
      wino_ = kern::WinogradConv::make(const_w_, const_b_.defined() ? &const_b_ : nullptr, post_, tile, tiles);
    });
    if (!wino_) return false;
    Tensor xb = x, rb = r ? *r : Tensor(), yb = y;
    if (!src_blk_) {
      xb = Tensor::uninitialized(DType::Float, kern::blocked_dims(xd, 16));
      kern::to_blocked(x, xb);
    }
    if (r && !res_blk_) {
      rb = Tensor::uninitialized(DType::Float, kern::blocked_dims(yd, 16));
      kern::to_blocked(*r, rb);
    }
    if (!dst_blk_) yb = Tensor::uninitialized(DType::Float, kern::blocked_dims(yd, 16));
    if (!wino_->run(xb.data<float>(), xd[0], xd[2], xd[3], {s.g.pb[0], s.g.pb[1], s.g.pe[0], s.g.pe[1]},
                    yb.data<float>(), yd[2], yd[3], r ? rb.data<float>() : nullptr, ctx.threads()))
      return false;
    if (!dst_blk_) kern::to_plain(yb, y);
    return true;
  }

  size_t head_len() const {
    size_t n = 0;
    while (n < post_.size() && post_[n].kind != kern::ConvPostOp::Kind::Sum) ++n;
    return n;
  }
};

// FromBlocked: a channel-blocked activation back to plain NCHW, for readers other than convs.
void run_from_blocked(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t c = ctx.node().attr_int("channels");
  if (x.dtype() != DType::Float) ctx.fail("expects f32");
  Tensor& y = ctx.allocate_output_uninit(0, DType::Float, kern::logical_dims(x.dims(), c));
  if (y.numel()) kern::to_plain(x, y);
}

// ConvTranspose geometry: output size from output_shape, auto_pad or pads + output_padding.
struct TransposeAttrs {
  WindowAttrs w;
  Dims output_padding, output_shape;
};

Geom transpose_geom(const KernelContext& ctx, const TransposeAttrs& a, const Dims& in, const Dims& k) {
  size_t n = in.size();
  Geom g;
  g.nsp = static_cast<int>(n);
  g.in = in;
  g.k = k;
  g.stride = a.w.strides.empty() ? Dims(n, 1) : a.w.strides;
  g.dil = a.w.dilations.empty() ? Dims(n, 1) : a.w.dilations;
  Dims op = a.output_padding.empty() ? Dims(n, 0) : a.output_padding;
  if (g.stride.size() != n || g.dil.size() != n || op.size() != n)
    ctx.fail("strides, dilations and output_padding need one value per spatial dimension");
  if (!a.w.pads.empty() && a.w.pads.size() != 2 * n) ctx.fail("pads needs two values per spatial dimension");
  Dims os = a.output_shape;
  if (os.size() == n + 2) os.erase(os.begin(), os.begin() + 2);
  if (!os.empty() && os.size() != n) ctx.fail("output_shape needs one value per spatial dimension");
  g.pb.assign(n, 0);
  g.pe.assign(n, 0);
  g.out.assign(n, 0);
  bool same = a.w.auto_pad == "SAME_UPPER" || a.w.auto_pad == "SAME_LOWER";
  for (size_t i = 0; i < n; ++i) {
    if (g.stride[i] < 1 || g.dil[i] < 1 || k[i] < 1) ctx.fail("kernel_shape, strides and dilations must be positive");
    int64_t full = g.stride[i] * (in[i] - 1) + op[i] + (k[i] - 1) * g.dil[i] + 1;
    if (!os.empty() || same) {
      g.out[i] = !os.empty() ? os[i] : in[i] * g.stride[i];
      // An output larger than the full extent is padded at the end; odd padding goes to the end
      // except for SAME_LOWER (as the ONNX reference outputs do).
      int64_t total = std::max<int64_t>(0, full - g.out[i]);
      g.pb[i] = a.w.auto_pad == "SAME_LOWER" ? total - total / 2 : total / 2;
      g.pe[i] = total - g.pb[i];
    } else {
      if (!a.w.pads.empty()) g.pb[i] = a.w.pads[i], g.pe[i] = a.w.pads[i + n];
      g.out[i] = full - g.pb[i] - g.pe[i];
    }
    if (g.out[i] < 0) ctx.fail("computed output size is negative");
  }
  return g;
}

class ConvTransposeKernel : public OpKernel {
 public:
  explicit ConvTransposeKernel(const KernelInfo& info) : group_(info.node.attr_int("group", 1)) {
    attrs_.w = WindowAttrs::from_node(info.node);
    attrs_.output_padding = info.node.attr_ints("output_padding");
    attrs_.output_shape = info.node.attr_ints("output_shape");
    if (info.fast_paths && group_ >= 1) {
      dnnl_ = std::make_unique<kern::DnnlConv>(true, group_);
      const Tensor* w = info.constant_input(1);
      const Tensor* b = info.node.has_input(2) ? info.constant_input(2) : nullptr;
      if (b && b->dtype() != DType::Float) b = nullptr;
      if (w && w->dtype() == DType::Float && w->rank() >= 3 && w->dim(0) % group_ == 0 &&
          attrs_.output_shape.empty() && attrs_.w.auto_pad == "NOTSET") {
        Dims in(static_cast<size_t>(w->rank() - 2), 16);
        try {
          dnnl_->prepack(*w, b, w->dim(0), probe(attrs_, in, spatial(w->dims())));
        } catch (const Error&) {
          // Inconsistent attributes: reported with context at run time.
        }
      }
    }
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (x.rank() < 3 || w.rank() != x.rank())
      ctx.fail("X (rank >= 3) and W must have the same rank, got " + dims_to_string(x.dims()) + " and " +
               dims_to_string(w.dims()));
    if (x.rank() > 5) ctx.fail("only 1, 2 and 3 spatial dimensions are supported");
    int64_t n = x.dim(0), c = x.dim(1);
    if (group_ < 1 || w.dim(0) != c || c % group_ != 0)
      ctx.fail("W " + dims_to_string(w.dims()) + " does not match X's " + std::to_string(c) + " channels with group " +
               std::to_string(group_));
    int64_t m = w.dim(1) * group_;
    Dims k = spatial(w.dims());
    if (!attrs_.w.kernel.empty() && attrs_.w.kernel != k) ctx.fail("kernel_shape does not match W");
    check_bias(ctx, b, m);
    Geom g = transpose_geom(ctx, attrs_, spatial(x.dims()), k);
    Dims yd{n, m};
    yd.insert(yd.end(), g.out.begin(), g.out.end());
    Tensor& y = ctx.allocate_output(0, x.dtype(), yd);
    if (y.numel() == 0) return;
    if (dnnl_ && x.dtype() == DType::Float && w.dtype() == DType::Float && (!b || b->dtype() == DType::Float) &&
        dnnl_->run(x, w, b, g, y))
      return;
    Geom g3 = g.as_3d();
    with_float_buffers(ctx, x, w, b, y, [&](const auto* xp, const auto* wp, const auto* bp, auto* yp) {
      kern::conv_transpose_ref(xp, wp, bp, yp, n, c, m, group_, g3, ctx.threads());
    });
  }

 private:
  Geom probe(const TransposeAttrs& a, const Dims& in, const Dims& k) const {
    Geom g;
    size_t n = in.size();
    g.nsp = static_cast<int>(n);
    g.in = in, g.k = k;
    g.stride = a.w.strides.empty() ? Dims(n, 1) : a.w.strides;
    g.dil = a.w.dilations.empty() ? Dims(n, 1) : a.w.dilations;
    Dims op = a.output_padding.empty() ? Dims(n, 0) : a.output_padding;
    g.pb = a.w.pads.size() == 2 * n ? Dims(a.w.pads.begin(), a.w.pads.begin() + static_cast<long>(n)) : Dims(n, 0);
    g.pe = a.w.pads.size() == 2 * n ? Dims(a.w.pads.begin() + static_cast<long>(n), a.w.pads.end()) : Dims(n, 0);
    if (g.stride.size() != n || g.dil.size() != n || op.size() != n) throw Error("bad attributes");
    g.out.resize(n);
    for (size_t i = 0; i < n; ++i)
      g.out[i] = g.stride[i] * (in[i] - 1) + op[i] + (k[i] - 1) * g.dil[i] + 1 - g.pb[i] - g.pe[i];
    return g;
  }

  TransposeAttrs attrs_;
  int64_t group_;
  std::unique_ptr<kern::DnnlConv> dnnl_;
};

// Zero points: a scalar, or (for W) one per output channel.
std::vector<int32_t> zero_points(const KernelContext& ctx, int idx, int64_t per, const char* what) {
  if (!ctx.has_input(idx)) return std::vector<int32_t>(static_cast<size_t>(per), 0);
  const Tensor& z = ctx.input(idx);
  if (z.numel() != 1 && z.numel() != per)
    ctx.fail(std::string(what) + " must be a scalar or have " + std::to_string(per) + " values");
  std::vector<int32_t> r(static_cast<size_t>(per));
  for (int64_t i = 0; i < per; ++i) r[static_cast<size_t>(i)] = static_cast<int32_t>(z.as_int(z.numel() == 1 ? 0 : i));
  return r;
}

void check_8bit(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DType::UInt8 && t.dtype() != DType::Int8)
    ctx.fail(std::string(what) + " must be uint8 or int8, got " + std::string(dtype_name(t.dtype())));
}

// Integer convolution: (x - x_zp) conv (w - w_zp) [+ b] accumulated in int32.
std::vector<int32_t> int_conv(const KernelContext& ctx, const WindowAttrs& a, int64_t group, const Tensor& x,
                              int x_zp_idx, const Tensor& w, int w_zp_idx, const Tensor* b, ConvShape& s) {
  check_8bit(ctx, x, "X");
  check_8bit(ctx, w, "W");
  s = conv_shape(ctx, a, group, x, w);
  std::vector<int32_t> xz = zero_points(ctx, x_zp_idx, 1, "x_zero_point");
  std::vector<int32_t> wz = zero_points(ctx, w_zp_idx, s.m, "w_zero_point");
  std::vector<int32_t> xi(static_cast<size_t>(x.numel())), wi(static_cast<size_t>(w.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) xi[static_cast<size_t>(i)] = static_cast<int32_t>(x.as_int(i)) - xz[0];
  int64_t per_m = w.numel() / std::max<int64_t>(1, s.m);
  for (int64_t i = 0; i < w.numel(); ++i)
    wi[static_cast<size_t>(i)] = static_cast<int32_t>(w.as_int(i)) - wz[static_cast<size_t>(i / per_m)];
  std::vector<int32_t> bi;
  if (b) {
    if (b->dtype() != DType::Int32) ctx.fail("B must be int32");
    check_bias(ctx, b, s.m);
    bi.assign(b->data<int32_t>(), b->data<int32_t>() + s.m);
  }
  std::vector<int32_t> y(static_cast<size_t>(s.n * s.m * s.g.out_size()));
  kern::conv_ref(xi.data(), wi.data(), b ? bi.data() : static_cast<const int32_t*>(nullptr), y.data(), s.n, s.c, s.m,
                 group, s.g.as_3d(), ctx.threads());
  return y;
}

Dims out_dims(const ConvShape& s) {
  Dims d{s.n, s.m};
  d.insert(d.end(), s.g.out.begin(), s.g.out.end());
  return d;
}

class ConvIntegerKernel : public OpKernel {
 public:
  explicit ConvIntegerKernel(const KernelInfo& info)
      : attrs_(WindowAttrs::from_node(info.node)), group_(info.node.attr_int("group", 1)) {}
  void run(KernelContext& ctx) override {
    ConvShape s;
    std::vector<int32_t> y = int_conv(ctx, attrs_, group_, ctx.input(0), 2, ctx.input(1), 3, nullptr, s);
    Tensor& out = ctx.allocate_output(0, DType::Int32, out_dims(s));
    std::copy(y.begin(), y.end(), out.data<int32_t>());
  }

 private:
  WindowAttrs attrs_;
  int64_t group_;
};

class QLinearConvKernel : public OpKernel {
 public:
  explicit QLinearConvKernel(const KernelInfo& info)
      : attrs_(WindowAttrs::from_node(info.node)), group_(info.node.attr_int("group", 1)) {}
  void run(KernelContext& ctx) override {
    const Tensor* b = ctx.has_input(8) ? &ctx.input(8) : nullptr;
    ConvShape s;
    std::vector<int32_t> acc = int_conv(ctx, attrs_, group_, ctx.input(0), 2, ctx.input(3), 5, b, s);
    const Tensor& xs = ctx.input(1);
    const Tensor& ws = ctx.input(4);
    const Tensor& ys = ctx.input(6);
    const Tensor& yz = ctx.input(7);
    check_8bit(ctx, yz, "y_zero_point");
    if (xs.numel() != 1 || ys.numel() != 1 || yz.numel() != 1) ctx.fail("x_scale, y_scale and y_zero_point must be scalars");
    if (ws.numel() != 1 && ws.numel() != s.m) ctx.fail("w_scale must be a scalar or have one value per output channel");
    float xsv = static_cast<float>(xs.as_double(0)), ysv = static_cast<float>(ys.as_double(0));
    int32_t zp = static_cast<int32_t>(yz.as_int(0));
    bool u8 = yz.dtype() == DType::UInt8;
    int32_t lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
    Tensor& y = ctx.allocate_output(0, yz.dtype(), out_dims(s));
    int64_t plane = s.g.out_size();
    for (int64_t i = 0; i < static_cast<int64_t>(acc.size()); ++i) {
      int64_t m = (i / plane) % s.m;
      float mult = xsv * static_cast<float>(ws.as_double(ws.numel() == 1 ? 0 : m)) / ysv;
      float v = std::nearbyint(static_cast<float>(acc[static_cast<size_t>(i)]) * mult) + static_cast<float>(zp);
      int32_t q = static_cast<int32_t>(std::min<float>(std::max<float>(v, static_cast<float>(lo)), static_cast<float>(hi)));
      if (u8) y.data<uint8_t>()[i] = static_cast<uint8_t>(q);
      else y.data<int8_t>()[i] = static_cast<int8_t>(q);
    }
  }

 private:
  WindowAttrs attrs_;
  int64_t group_;
};

}  // namespace

void register_conv_kernels(KernelRegistry& r) {
  r.add("", "Conv", 1, factory_of<ConvKernel>());
  r.add("", "ConvTranspose", 1, factory_of<ConvTransposeKernel>());
  r.add("", "ConvInteger", 10, factory_of<ConvIntegerKernel>());
  r.add("", "QLinearConv", 10, factory_of<QLinearConvKernel>());
  r.add(kInternalDomain, "FusedConv", 1, factory_of<ConvKernel>());
  r.add(kInternalDomain, "FromBlocked", 1, stateless(run_from_blocked));
}

}  // namespace t2o
