// The runtime's Int8Conv (runtime/optimize.h): a static QDQ model's 2-d convolution
// (QuantizeLinear -> DequantizeLinear on the activation, DequantizeLinear of constant int8 weights
// with zero point 0, float bias) computed in int8:
//   Int8Conv(X, Wq, Ws, [B], x_scale, [x_zero_point])  with Conv's attributes, and optionally
//   FusedConv's post-ops (post_ops / post_alpha / post_beta); a "Sum" among them adds input 8,
//   R (float, Y's dims), there: a residual connection (res_nhwc: R is channels-last)
// Attributes set by the runtime's rewrites: src_nhwc / dst_nhwc (X / Y are channels-last,
// [N, H, W, C], else NCHW); src_block / dst_block (float X / Y channel-blocked as the float convs
// keep them next to it, [N, C/b, H, W, b], see conv_dnnl.h); src_quantized (X is already the 8-bit activation, of x_zero_point's
// type). Inputs 6 and 7, y_scale / y_zero_point, make Y quantized (QuantizeLinear of the float
// result, y_zero_point's type): oneDNN then requantizes as it stores, multiplying by 1 / y_scale
// where QuantizeLinear divides, so a value on a rounding boundary may land one step away. A
// QLinearConv is an Int8Conv with src_quantized and y_scale, in NCHW.
// X (float, NCHW) is quantized with x_scale / x_zero_point as QuantizeLinear does, the products are
// summed in int32 (exact; the float graph rounds each sum), and y = acc * x_scale * Ws[m] + B[m].
// Ws holds one scale or one per output channel.
// Without x_scale (input 4) X is quantized as DynamicQuantizeLinear does (uint8, the range of this
// run including 0): the dynamic chain DynamicQuantizeLinear -> ConvInteger -> Cast -> Mul(x_scale *
// Ws) [-> Add bias], whose values this computes with the same arithmetic (exact int32 sums, then
// float(acc) * (x_scale * Ws[m]) + B[m]).
//
// Fast path: oneDNN's int8 convolution (VNNI/AMX CPUs only, see int8_products_exact), the
// activation quantized straight into the channels-last layout it reads, the zero point, scales and
// bias applied by oneDNN, the float result reordered back to NCHW.
#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "runtime/kernels/conv_dnnl.h"
#include "runtime/kernels/conv_geom.h"
#include "runtime/kernels/int8.h"
#include "runtime/kernels/int8_dnnl.h"
#include "runtime/kernels/util.h"
#include "runtime/optimize.h"

namespace t2o::kern {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

using int8_dnnl::engine;

class Int8ConvKernel : public OpKernel {
 public:
  explicit Int8ConvKernel(const KernelInfo& info) : node_(info.node), attrs_(WindowAttrs::from_node(info.node)) {
    const Node& n = info.node;
    group_ = n.attr_int("group", 1);
    src_nhwc_ = n.attr_int("src_nhwc", 0) != 0;
    dst_nhwc_ = n.attr_int("dst_nhwc", 0) != 0;
    src_quantized_ = n.attr_int("src_quantized", 0) != 0;
    res_nhwc_ = n.attr_int("res_nhwc", 0) != 0;
    src_blk_ = n.attr_int("src_block", 0);
    dst_blk_ = n.attr_int("dst_block", 0);
    if ((src_blk_ && (src_nhwc_ || src_quantized_)) || (dst_blk_ && (dst_nhwc_ || n.has_input(6) || n.has_input(8))) ||
        (src_blk_ && src_blk_ != 8 && src_blk_ != 16) || (dst_blk_ && dst_blk_ != 8 && dst_blk_ != 16))
      return;
    post_ = conv_post_ops(n);
    int sums = 0;
    for (const ConvPostOp& p : post_) sums += p.kind == ConvPostOp::Kind::Sum;
    residual_ = sums == 1;
    if (sums > 1 || residual_ != n.has_input(8)) return;
    const Tensor* w = info.constant_input(1);
    const Tensor* ws = info.constant_input(2);
    dynamic_ = !n.has_input(4);
    std::optional<QuantParam> x = dynamic_ ? std::optional<QuantParam>(QuantParam{}) : constant_quant_param(info, 4);
    if (dynamic_ && src_quantized_) return;
    if (!w || !ws || !x || w->dtype() != DType::Int8 || w->rank() != 4 || group_ < 1) return;
    M_ = w->dim(0);
    if (M_ % group_ != 0 || !dtype_is_float(ws->dtype()) || (ws->numel() != 1 && ws->numel() != M_)) return;
    wq_ = *w;
    x_ = *x;
    for (int64_t m = 0; m < M_; ++m) ws_.push_back(static_cast<float>(ws->as_double(ws->numel() == 1 ? 0 : m)));
    for (float v : ws_) scale_.push_back(x_.scale * v);
    bias_.assign(static_cast<size_t>(M_), 0.0f);
    if (n.has_input(3)) {
      const Tensor* b = info.constant_input(3);
      if (!b || b->dtype() != DType::Float || b->numel() != M_) return;
      std::copy(b->data<float>(), b->data<float>() + M_, bias_.begin());
    }
    if (n.has_input(6)) {
      std::optional<QuantParam> yq = constant_quant_param(info, 6);
      if (!yq || residual_) return;
      y_quantized_ = true;
      y_ = *yq;
    }
    valid_ = true;
    fast_ = info.fast_paths && int8_products_exact();
  }

  void run(KernelContext& ctx) override {
    if (!valid_)
      ctx.fail("needs constant int8 4-D weights, their scales (1 or per output channel), a float bias, one activation "
               "scale or none (dynamic), element-wise post-ops, and a float residual R (input 8) exactly when a Sum "
               "post-op adds it");
    const Tensor& X = ctx.input(0);
    const DType xt = src_quantized_ ? (x_.is_signed ? DType::Int8 : DType::UInt8) : DType::Float;
    if (X.dtype() != xt || X.rank() != (src_blk_ ? 5 : 4))
      ctx.fail("X must be a " + std::string(src_blk_ ? "channel-blocked" : "4-D") + " " + std::string(dtype_name(xt)) + " tensor");
    if (src_blk_ && X.dim(4) != src_blk_) ctx.fail("X's channel blocks must be " + std::to_string(src_blk_) + " wide");
    const int64_t C = src_blk_ ? wq_.dim(1) * group_ : X.dim(src_nhwc_ ? 3 : 1);
    if (src_blk_ && X.dim(1) != (C + src_blk_ - 1) / src_blk_)
      ctx.fail("X holds " + std::to_string(X.dim(1)) + " channel blocks, the weights need " +
               std::to_string((C + src_blk_ - 1) / src_blk_));
    const int64_t N = X.dim(0), H = X.dim(src_nhwc_ ? 1 : 2), W = X.dim(src_nhwc_ ? 2 : 3);
    if (C != wq_.dim(1) * group_)
      ctx.fail("X has " + std::to_string(C) + " channels, the weights need " + std::to_string(wq_.dim(1) * group_));
    Geom g = forward_geom(node_, attrs_, {H, W}, {wq_.dim(2), wq_.dim(3)});
    const int64_t OH = g.out[0], OW = g.out[1];
    const DType yt = y_quantized_ ? (y_.is_signed ? DType::Int8 : DType::UInt8) : DType::Float;
    const Dims ydims = dst_nhwc_ ? Dims{N, OH, OW, M_} : dst_blk_ ? blocked_dims({N, M_, OH, OW}, dst_blk_) : Dims{N, M_, OH, OW};
    const Tensor* R = residual_ ? &ctx.input(8) : nullptr;
    if (R && R->dtype() != DType::Float) ctx.fail("the residual R must be float");
    if (R && R->dims() != (res_nhwc_ ? Dims{N, OH, OW, M_} : Dims{N, M_, OH, OW})) {
      // The Add broadcasts (a bias-like R): the conv and the post-ops before the sum here, the
      // rest as the unfused nodes would. The layout rewrites only pair equal dims.
      if (res_nhwc_ || dst_nhwc_ || dst_blk_) ctx.fail("a channels-last residual must have the output's dims");
      size_t sum = 0;
      while (post_[sum].kind != ConvPostOp::Kind::Sum) ++sum;
      Tensor c(DType::Float, {N, M_, OH, OW});
      run_into(ctx, X, g, c.raw(), nullptr, sum);
      ctx.set_output(0, RValue(apply_post_ops_ref(ctx, post_, c, R, sum)));
      return;
    }
    // Blocked channels past M are zero.
    Tensor& Y = dst_blk_ && M_ % dst_blk_ ? ctx.allocate_output(0, yt, ydims) : ctx.allocate_output_uninit(0, yt, ydims);
    if (Y.numel() == 0) return;
    run_into(ctx, X, g, Y.raw(), R ? R->data<float>() : nullptr, post_.size());
  }

 private:
  // The convolution and its first `npost` post-ops into y (Y's layout and type), R added at the
  // Sum. Fewer than all post-ops run on the reference loops.
  void run_into(KernelContext& ctx, const Tensor& X, const Geom& g, void* y, const float* r, size_t npost) {
    const int64_t N = X.dim(0), C = src_blk_ ? wq_.dim(1) * group_ : X.dim(src_nhwc_ ? 3 : 1);
    const int64_t H = X.dim(src_nhwc_ ? 1 : 2), W = X.dim(src_nhwc_ ? 2 : 3);
    // Quantized X, channels last (what oneDNN's int8 kernels read; the reference reads it too).
    std::unique_ptr<uint8_t[]> own;  // uninitialized: every byte is written
    const uint8_t* q = static_cast<const uint8_t*>(X.raw());
    // The activation's quantization: constant, or this run's (then the output scales too).
    float s = x_.scale;
    int32_t z = x_.zero;
    const float* scale = scale_.data();
    std::vector<float> run_scale;
    if (dynamic_) {
      dynamic_quant_params(X.data<float>(), X.numel(), s, z, ctx.threads());
      for (float v : ws_) run_scale.push_back(s * v);  // as the graph's Mul(x_scale, Ws)
      scale = run_scale.data();
    }
    if (!src_quantized_ || !src_nhwc_) {
      own.reset(new uint8_t[static_cast<size_t>(X.numel())]);
      if (src_quantized_) to_nhwc(q, N, C, H, W, own.get());
      else quantize_nhwc(X.data<float>(), N, C, H, W, s, z, own.get(), ctx.threads());
      q = own.get();
    }
    // oneDNN divides by sizes while choosing kernels: empty inputs take the loops, as do the
    // dynamic chain's zero or non-finite scales.
    const bool finite = std::isfinite(s) && s != 0;
    if (fast_ && finite && npost == post_.size() && X.numel() > 0 && dnnl_run(q, N, C, H, W, g, z, scale, y, r)) return;
    reference(q, N, C, H, W, g, z, scale, y, r, npost, ctx.threads());
  }

  struct Prim {
    dnnl::convolution_forward conv;
    memory::desc scratchpad, dst;
  };

  // X quantized into [N, HW, C]: as it is when it is channels-last already, else quantized in
  // place order and then reordered by oneDNN.
  void quantize_nhwc(const float* x, int64_t N, int64_t C, int64_t H, int64_t W, float s, int32_t z, uint8_t* q,
                     int threads) {
    // A blocked X holds whole blocks (its padded channels are zeros: they quantize to z, unused).
    const int64_t b = src_blk_, n = N * (b ? (C + b - 1) / b * b : C) * H * W;
    auto quantize = [&](uint8_t* to) {
      if (dynamic_) dynamic_quantize_bytes(x, n, s, z, to, threads);
      else quantize_bytes(x, n, s, static_cast<float>(z), x_.lo(), x_.hi(), to, threads);
    };
    if (src_nhwc_) return quantize(q);
    std::unique_ptr<uint8_t[]> staged(new uint8_t[static_cast<size_t>(n)]);
    quantize(staged.get());
    to_nhwc(staged.get(), N, C, H, W, q, b);
  }

  // 8-bit NCHW (blk 0) or channel-blocked `from` into NHWC `to` (oneDNN's reorder, or a plain loop).
  void to_nhwc(const uint8_t* from, int64_t N, int64_t C, int64_t H, int64_t W, uint8_t* to, int64_t blk = 0) const {
    try {
      const dt t = x_.is_signed ? dt::s8 : dt::u8;
      const tag layout = blk == 16 ? tag::nChw16c : blk == 8 ? tag::nChw8c : tag::nchw;
      memory a(memory::desc({N, C, H, W}, t, layout), engine(), const_cast<uint8_t*>(from));
      memory b(memory::desc({N, C, H, W}, t, tag::nhwc), engine(), to);
      dnnl::stream st(engine());
      dnnl::reorder(a, b).execute(st, a, b);
      st.wait();
    } catch (const dnnl::error&) {
      const int64_t HW = H * W, CB = blk ? (C + blk - 1) / blk : C;
      for (int64_t i = 0; i < N; ++i)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t p = 0; p < HW; ++p)
            to[(i * HW + p) * C + c] = blk ? from[((i * CB + c / blk) * HW + p) * blk + c % blk] : from[(i * C + c) * HW + p];
    }
  }

  int32_t qval(const uint8_t* q, int64_t i) const {
    return x_.is_signed ? static_cast<int32_t>(static_cast<int8_t>(q[i])) : static_cast<int32_t>(q[i]);
  }

  // Direct int32 convolution of (q - z) with Wq; padding is real zero, i.e. q = z. Then
  // float(acc) * scale[m] + B[m] and the post-ops.
  void reference(const uint8_t* q, int64_t N, int64_t C, int64_t H, int64_t W, const Geom& g, int32_t z,
                 const float* scale, void* y, const float* r, size_t npost, int threads) const {
    const int64_t OH = g.out[0], OW = g.out[1], KH = wq_.dim(2), KW = wq_.dim(3);
    const int64_t Cg = C / group_, Mg = M_ / group_;
    const int8_t* w = wq_.data<int8_t>();
    const int64_t blk = dst_blk_ ? dst_blk_ : 1, mb = (M_ + blk - 1) / blk;  // Y's channel blocks
    parallel_for(N * M_, threads, 1, [&](int64_t b, int64_t e) {
      for (int64_t nm = b; nm < e; ++nm) {
        int64_t n = nm / M_, m = nm % M_, gi = m / Mg;
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            int64_t acc = 0;
            for (int64_t kh = 0; kh < KH; ++kh) {
              int64_t ih = oh * g.stride[0] - g.pb[0] + kh * g.dil[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t iw = ow * g.stride[1] - g.pb[1] + kw * g.dil[1];
                if (iw < 0 || iw >= W) continue;
                const int64_t base = ((n * H + ih) * W + iw) * C + gi * Cg;
                for (int64_t c = 0; c < Cg; ++c)
                  acc += static_cast<int64_t>(qval(q, base + c) - z) * w[((m * Cg + c) * KH + kh) * KW + kw];
              }
            }
            float v = static_cast<float>(acc) * scale[m] + bias_[static_cast<size_t>(m)];
            const int64_t nhwc_at = ((n * OH + oh) * OW + ow) * M_ + m, nchw_at = ((n * M_ + m) * OH + oh) * OW + ow;
            for (size_t k = 0; k < npost; ++k)
              v = post_[k].kind == ConvPostOp::Kind::Sum ? v + r[res_nhwc_ ? nhwc_at : nchw_at] : post_[k].apply(v);
            int64_t at = dst_nhwc_  ? nhwc_at
                         : dst_blk_ ? (((n * mb + m / blk) * OH + oh) * OW + ow) * blk + m % blk
                                    : nchw_at;
            if (!y_quantized_) {
              static_cast<float*>(y)[at] = v;
            } else {
              float r = quantize_one(v, y_.scale, static_cast<float>(y_.zero), y_.is_signed ? -128.0f : 0.0f,
                                     y_.is_signed ? 127.0f : 255.0f);
              static_cast<uint8_t*>(y)[at] = static_cast<uint8_t>(static_cast<int32_t>(r) & 0xff);
            }
          }
      }
    });
  }

  // `r`: the residual (a Sum post-op), in res_nhwc_'s layout; oneDNN's sum post-op adds what the
  // destination holds, so R is copied there first.
  // The dynamic chain's scales and zero point change from run to run: they are run-time
  // arguments (a zero point oneDNN takes at run time, the scales as a per-channel multiply before
  // the bias, the graph's order of operations).
  bool dnnl_run(const uint8_t* q, int64_t N, int64_t C, int64_t H, int64_t W, const Geom& g, int32_t z,
                const float* scale, void* y, const float* r) {
    try {
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t OH = g.out[0], OW = g.out[1];
      auto key = std::make_tuple(N, H, W);
      memory::desc src({N, C, H, W}, x_.is_signed ? dt::s8 : dt::u8, tag::nhwc);
      memory::desc bias_md({1, M_, 1, 1}, dt::f32, tag::abcd);
      const dt ydt = !y_quantized_ ? dt::f32 : y_.is_signed ? dt::s8 : dt::u8;
      memory::desc nchw({N, M_, OH, OW}, ydt, tag::nchw);
      auto it = cache_.find(key);
      if (it == cache_.end()) {
        if (rejected_.count(key)) return false;
        if (cache_.size() >= 16) cache_.clear();
        memory::dims wd = group_ == 1 ? memory::dims{M_, C, wq_.dim(2), wq_.dim(3)}
                                      : memory::dims{group_, M_ / group_, C / group_, wq_.dim(2), wq_.dim(3)};
        memory::desc w_any(wd, dt::s8, tag::any);
        memory::desc dst({N, M_, OH, OW}, ydt, tag::nhwc);
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::post_ops po;
        if (dynamic_) {
          attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
          po.append_binary(dnnl::algorithm::binary_mul, bias_md);
        } else {
          attr.set_output_scales(1 << 1, scale_);
          if (x_.zero != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {x_.zero});
        }
        po.append_binary(dnnl::algorithm::binary_add, bias_md);
        for (const ConvPostOp& p : post_) {
          using K = ConvPostOp::Kind;
          if (p.kind == K::Sum) po.append_sum(1.0f);
          else if (p.kind == K::Relu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, p.alpha, 0.0f);
          else if (p.kind == K::Clip) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, p.alpha, p.beta);
          else if (p.kind == K::Swish) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
          else if (p.kind == K::HardSwish) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f);
        }
        // QuantizeLinear of the result: y / y_scale + y_zero_point, rounded and saturated as stored.
        if (y_quantized_)
          po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, 1.0f / y_.scale, static_cast<float>(y_.zero));
        attr.set_post_ops(po);
        memory::dims dil{g.dil[0] - 1, g.dil[1] - 1};
        dnnl::convolution_forward::primitive_desc pd;
        try {
          pd = dnnl::convolution_forward::primitive_desc(
              dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                              src, w_any, dst, {g.stride[0], g.stride[1]}, dil,
                                              {g.pb[0], g.pb[1]}, {g.pe[0], g.pe[1]}),
              attr, engine());
          // The reference implementation is far slower than our own loops over the int8 values.
          if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) throw dnnl::error(dnnl_unimplemented, "ref");
        } catch (const dnnl::error&) {
          rejected_.insert(key);
          return false;
        }
        if (!packed_ || packed_->get_desc() != pd.weights_desc()) {
          packed_ = int8_dnnl::pack(memory::desc(wd, dt::s8, group_ == 1 ? tag::oihw : tag::goihw), wq_.raw(),
                                    pd.weights_desc());
          cache_.clear();
        }
        memory::desc got = pd.dst_desc();
        it = cache_.emplace(key, Prim{dnnl::convolution_forward(pd), pd.scratchpad_desc(), got}).first;
      }
      Prim& p = it->second;
      // Channels-last output: oneDNN writes y itself; else its own layout, reordered into y.
      const bool direct = dst_nhwc_ && p.dst == memory::desc({N, M_, OH, OW}, ydt, tag::nhwc);
      size_t need = p.dst.get_size();
      if (!direct && tmp_.size() < need / sizeof(float) + 16) tmp_.resize(need / sizeof(float) + 16);
      memory dm(p.dst, engine(), direct ? y : tmp_.data());
      const int bias_at = dynamic_ ? 1 : 0;
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(src, engine(), const_cast<uint8_t*>(q))},
                                           {DNNL_ARG_WEIGHTS, *packed_},
                                           {DNNL_ARG_DST, dm},
                                           {DNNL_ARG_ATTR_MULTIPLE_POST_OP(bias_at) | DNNL_ARG_SRC_1,
                                            memory(bias_md, engine(), bias_.data())}};
      if (dynamic_) {
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                     memory(bias_md, engine(), const_cast<float*>(scale)));
        args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC,
                     memory(memory::desc({1}, dt::s32, tag::x), engine(), &z));
      }
      if (p.scratchpad.get_size()) args.emplace(DNNL_ARG_SCRATCHPAD, int8_dnnl::scratchpad(p.scratchpad, scratch_));
      dnnl::stream st(engine());
      if (r) {
        memory rm(memory::desc({N, M_, OH, OW}, dt::f32, res_nhwc_ ? tag::nhwc : tag::nchw), engine(), const_cast<float*>(r));
        dnnl::reorder(rm, dm).execute(st, rm, dm);
      }
      p.conv.execute(st, args);
      if (!direct) {
        const memory::desc blocked({N, M_, OH, OW}, ydt, dst_blk_ == 16 ? tag::nChw16c : tag::nChw8c);
        memory ym(dst_nhwc_ ? memory::desc({N, M_, OH, OW}, ydt, tag::nhwc) : dst_blk_ ? blocked : nchw, engine(), y);
        dnnl::reorder(dm, ym).execute(st, dm, ym);
      }
      st.wait();
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }

  Node node_;
  WindowAttrs attrs_;
  bool valid_ = false, fast_ = false, src_nhwc_ = false, dst_nhwc_ = false, residual_ = false, res_nhwc_ = false;
  bool src_quantized_ = false, y_quantized_ = false, dynamic_ = false;
  int64_t src_blk_ = 0, dst_blk_ = 0;  // channel blocks of float X / Y (0: not blocked)
  QuantParam y_;  // the output's, when it is quantized
  int64_t group_ = 1, M_ = 0;
  Tensor wq_;
  QuantParam x_;  // the activation's quantization
  std::vector<float> ws_, scale_, bias_;  // scale_: x_scale * ws_ (static)
  std::vector<ConvPostOp> post_;
  std::mutex mu_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, Prim> cache_;
  std::set<std::tuple<int64_t, int64_t, int64_t>> rejected_;
  std::shared_ptr<memory> packed_;
  std::vector<float> tmp_;
  std::vector<uint8_t> scratch_;
};

}  // namespace

void register_int8_conv_kernels(KernelRegistry& r) {
  r.add(kInternalDomain, "Int8Conv", 1, factory_of<Int8ConvKernel>());
}

}  // namespace t2o::kern
