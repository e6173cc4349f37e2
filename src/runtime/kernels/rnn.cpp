// Recurrent layers: RNN, GRU, LSTM (ONNX gate orders: RNN i; GRU z r h; LSTM i o f c).
// Inputs are converted to an accumulation type (f32, or f64 for f64 models), the input
// projection X·Wᵀ is computed for the whole sequence at once, then each step adds H·Rᵀ.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/kernels/rnn_fast.h"
#include "runtime/kernels/util.h"
#include "runtime/optimize.h"

namespace t2o {
namespace {

enum class Act { Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus };

struct Activation {
  Act kind = Act::Sigmoid;
  float alpha = 0, beta = 0;
  template <typename A>
  A operator()(A x) const {
    switch (kind) {
      case Act::Sigmoid: return x >= 0 ? A(1) / (A(1) + std::exp(-x)) : std::exp(x) / (A(1) + std::exp(x));
      case Act::Tanh: return std::tanh(x);
      case Act::Relu: return !(x <= 0) ? x : A(0);  // NaN stays NaN
      case Act::Affine: return A(alpha) * x + A(beta);
      case Act::LeakyRelu: return x >= 0 ? x : A(alpha) * x;
      case Act::ThresholdedRelu: return x > A(alpha) ? x : A(0);
      case Act::ScaledTanh: return A(alpha) * std::tanh(A(beta) * x);
      case Act::HardSigmoid: return std::max(A(0), std::min(A(1), A(alpha) * x + A(beta)));
      case Act::Elu: return x >= 0 ? x : A(alpha) * (std::exp(x) - A(1));
      case Act::Softsign: return x / (A(1) + std::fabs(x));
      case Act::Softplus: return x > 20 ? x : std::log1p(std::exp(x));
    }
    return x;
  }
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Parses `activations` with their alpha/beta lists (consumed in order by the functions that take
// them; defaults as in the ONNX spec where a list runs short).
std::vector<Activation> parse_activations(const Node& n, const std::vector<std::string>& defaults, int num_dirs) {
  std::vector<std::string> names = n.attr_strings("activations");
  size_t per = defaults.size();
  if (names.empty()) {
    for (int d = 0; d < num_dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  } else if (names.size() == per && num_dirs == 2) {
    std::vector<std::string> twice = names;
    names.insert(names.end(), twice.begin(), twice.end());
  }
  if (names.size() != per * static_cast<size_t>(num_dirs))
    throw Error(n.describe() + ": expected " + std::to_string(per * static_cast<size_t>(num_dirs)) + " activations, got " +
                std::to_string(names.size()));
  std::vector<float> alphas = n.attr_floats("activation_alpha"), betas = n.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  auto take = [](const std::vector<float>& v, size_t& i, float dflt) { return i < v.size() ? v[i++] : dflt; };
  std::vector<Activation> out;
  for (const std::string& raw : names) {
    std::string s = lower(raw);
    Activation a;
    if (s == "sigmoid") a.kind = Act::Sigmoid;
    else if (s == "tanh") a.kind = Act::Tanh;
    else if (s == "relu") a.kind = Act::Relu;
    else if (s == "affine") { a.kind = Act::Affine; a.alpha = take(alphas, ai, 1.f); a.beta = take(betas, bi, 0.f); }
    else if (s == "leakyrelu") { a.kind = Act::LeakyRelu; a.alpha = take(alphas, ai, 0.01f); }
    else if (s == "thresholdedrelu") { a.kind = Act::ThresholdedRelu; a.alpha = take(alphas, ai, 1.f); }
    else if (s == "scaledtanh") { a.kind = Act::ScaledTanh; a.alpha = take(alphas, ai, 1.f); a.beta = take(betas, bi, 1.f); }
    else if (s == "hardsigmoid") { a.kind = Act::HardSigmoid; a.alpha = take(alphas, ai, 0.2f); a.beta = take(betas, bi, 0.5f); }
    else if (s == "elu") { a.kind = Act::Elu; a.alpha = take(alphas, ai, 1.f); }
    else if (s == "softsign") a.kind = Act::Softsign;
    else if (s == "softplus") a.kind = Act::Softplus;
    else throw Error(n.describe() + ": unsupported activation '" + raw + "'");
    out.push_back(a);
  }
  return out;
}

template <typename A>
std::vector<A> to_acc(const Tensor& t) {
  std::vector<A> v(static_cast<size_t>(t.numel()));
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) v[i] = static_cast<A>(static_cast<float>(p[i]));
      else v[i] = static_cast<A>(p[i]);
    }
  });
  return v;
}

template <typename A>
void from_acc(const std::vector<A>& v, Tensor& t) {
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) p[i] = T(static_cast<float>(v[i]));
      else p[i] = static_cast<T>(v[i]);
    }
  });
}

// Eight partial sums let the compiler vectorise without reassociating a single accumulator.
template <typename A>
A dot(const A* a, const A* b, int64_t n) {
  A p[8] = {};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) p[j] += a[k + j] * b[k + j];
  A s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  for (; k < n; ++k) s += a[k] * b[k];
  return s;
}

enum class Cell { Rnn, Gru, Lstm };

class RecurrentKernel : public OpKernel {
 public:
  RecurrentKernel(const KernelInfo& info, Cell cell, bool int8) : cell_(cell), int8_(int8) {
    const Node& n = info.node;
    gates_ = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
    std::string dir = n.attr_string("direction", "forward");
    if (dir == "forward") num_dirs_ = 1;
    else if (dir == "reverse") num_dirs_ = 1, reverse_only_ = true;
    else if (dir == "bidirectional") num_dirs_ = 2;
    else throw Error(n.describe() + ": unknown direction '" + dir + "'");
    hidden_ = n.attr_int("hidden_size", -1);
    clip_ = n.attr_float("clip", 0.f);
    has_clip_ = n.has_attr("clip");
    layout_ = n.attr_int("layout", 0);
    if (layout_ != 0 && layout_ != 1) throw Error(n.describe() + ": layout must be 0 or 1");
    input_forget_ = n.attr_int("input_forget", 0) != 0;
    linear_before_reset_ = n.attr_int("linear_before_reset", 0) != 0;
    std::vector<std::string> dflt = cell == Cell::Rnn   ? std::vector<std::string>{"Tanh"}
                                    : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                        : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    acts_ = parse_activations(n, dflt, num_dirs_);
    if (int8_) take_int8_weights(info);
    if (info.fast_paths) make_fast_path(info, dflt);
  }

  void run(KernelContext& ctx) override {
    if (fast_ && run_fast(ctx)) return;
    DType dt = ctx.input(0).dtype();
    if (int8_ && dt != DType::Float) ctx.fail("X must be float32, got " + std::string(dtype_name(dt)));
    const Tensor& W = int8_ ? dequantized(0) : ctx.input(1);
    const Tensor& R = int8_ ? dequantized(1) : ctx.input(2);
    if (dt == DType::Double) compute<double>(ctx, W, R);
    else if (dt == DType::Float || dt == DType::Float16 || dt == DType::BFloat16) compute<float>(ctx, W, R);
    else ctx.fail("X must be a floating-point tensor, got " + std::string(dtype_name(dt)));
  }

 private:
  // Int8LSTM / Int8GRU / Int8RNN: constant int8 W (input 1) and R (input 2) with zero point 0 and
  // their scales (inputs 8 and 9: one, or one per row of G*H).
  void take_int8_weights(const KernelInfo& info) {
    const Node& n = info.node;
    const Tensor* t[4] = {info.constant_input(1), info.constant_input(8), info.constant_input(2), info.constant_input(9)};
    for (int i = 0; i < 4; i += 2) {
      const Tensor* q = t[i];
      const Tensor* sc = t[i + 1];
      if (!q || !sc || q->dtype() != DType::Int8 || q->rank() != 3 || sc->dtype() != DType::Float ||
          (sc->numel() != 1 && sc->numel() != q->dim(1)))
        throw Error(n.describe() + ": needs constant int8 W and R of rank 3 and float scales (one, or one per row of G*H) as inputs 8 and 9");
    }
    wq_ = *t[0], ws_ = *t[1], rq_ = *t[2], rs_ = *t[3];
  }

  // W (k = 0) or R (k = 1) as float: q * scale. Made once, for the reference kernel.
  const Tensor& dequantized(int k) {
    std::call_once(dequantize_once_, [&] {
      for (int i = 0; i < 2; ++i) {
        const Tensor& q = i == 0 ? wq_ : rq_;
        const Tensor& sc = i == 0 ? ws_ : rs_;
        Tensor f(DType::Float, q.dims());
        const int64_t rows = q.dim(1), inner = q.dim(2);
        for (int64_t e = 0; e < q.numel(); ++e)
          f.data<float>()[e] = static_cast<float>(q.data<int8_t>()[e]) *
                               sc.data<float>()[sc.numel() == 1 ? 0 : (e / inner) % rows];
        (i == 0 ? w_float_ : r_float_) = std::move(f);
      }
    });
    return k == 0 ? w_float_ : r_float_;
  }

  template <typename A>
  void compute(KernelContext& ctx, const Tensor& W, const Tensor& R) {
    const Tensor& X = ctx.input(0);
    const int64_t G = gates_, D = num_dirs_;
    if (X.rank() != 3) ctx.fail("X must have rank 3, got " + dims_to_string(X.dims()));
    if (W.rank() != 3 || R.rank() != 3) ctx.fail("W and R must have rank 3");
    int64_t S = layout_ == 0 ? X.dim(0) : X.dim(1);
    int64_t B = layout_ == 0 ? X.dim(1) : X.dim(0);
    int64_t I = X.dim(2);
    int64_t H = hidden_ > 0 ? hidden_ : R.dim(2);
    if (W.dims() != Dims{D, G * H, I})
      ctx.fail("W has shape " + dims_to_string(W.dims()) + ", expected " + dims_to_string({D, G * H, I}));
    if (R.dims() != Dims{D, G * H, H})
      ctx.fail("R has shape " + dims_to_string(R.dims()) + ", expected " + dims_to_string({D, G * H, H}));
    auto x = to_acc<A>(X), w = to_acc<A>(W), r = to_acc<A>(R);
    std::vector<A> bias(static_cast<size_t>(D * 2 * G * H), A(0));
    if (ctx.has_input(3)) {
      const Tensor& Bt = ctx.input(3);
      if (Bt.dims() != Dims{D, 2 * G * H})
        ctx.fail("B has shape " + dims_to_string(Bt.dims()) + ", expected " + dims_to_string({D, 2 * G * H}));
      bias = to_acc<A>(Bt);
    }
    std::vector<int64_t> lens(static_cast<size_t>(B), S);
    if (ctx.has_input(4)) {
      const Tensor& L = ctx.input(4);
      if (L.numel() != B) ctx.fail("sequence_lens must have " + std::to_string(B) + " elements");
      lens = kern::to_int_vector(L);
      for (int64_t l : lens)
        if (l < 0 || l > S) ctx.fail("sequence_lens value " + std::to_string(l) + " is outside [0, " + std::to_string(S) + "]");
    }
    Dims state_dims = layout_ == 0 ? Dims{D, B, H} : Dims{B, D, H};
    auto h_off = [&](int64_t d, int64_t b) { return layout_ == 0 ? (d * B + b) * H : (b * D + d) * H; };
    std::vector<A> h0(static_cast<size_t>(D * B * H), A(0)), c0 = h0;
    if (ctx.has_input(5)) {
      if (ctx.input(5).dims() != state_dims) ctx.fail("initial_h must have shape " + dims_to_string(state_dims));
      h0 = to_acc<A>(ctx.input(5));
    }
    std::vector<A> peep(static_cast<size_t>(D * 3 * H), A(0));
    if (cell_ == Cell::Lstm) {
      if (ctx.has_input(6)) {
        if (ctx.input(6).dims() != state_dims) ctx.fail("initial_c must have shape " + dims_to_string(state_dims));
        c0 = to_acc<A>(ctx.input(6));
      }
      if (ctx.has_input(7)) {
        if (ctx.input(7).dims() != Dims{D, 3 * H}) ctx.fail("P must have shape " + dims_to_string({D, 3 * H}));
        peep = to_acc<A>(ctx.input(7));
      }
    }
    Dims y_dims = layout_ == 0 ? Dims{S, D, B, H} : Dims{B, S, D, H};
    std::vector<A> y(static_cast<size_t>(numel_of(y_dims)), A(0));
    std::vector<A> yh(h0.size()), yc(h0.size());
    auto y_off = [&](int64_t t, int64_t d, int64_t b) {
      return layout_ == 0 ? ((t * D + d) * B + b) * H : ((b * S + t) * D + d) * H;
    };
    auto x_off = [&](int64_t t, int64_t b) { return layout_ == 0 ? (t * B + b) * I : (b * S + t) * I; };

    const int64_t GH = G * H;
    std::vector<A> xw(static_cast<size_t>(S * B * GH));
    int per = cell_ == Cell::Rnn ? 1 : cell_ == Cell::Gru ? 2 : 3;
    for (int64_t d = 0; d < D; ++d) {
      bool rev = reverse_only_ || d == 1;
      const A* wd = w.data() + d * GH * I;
      const A* rd = r.data() + d * GH * H;
      const A* wb = bias.data() + d * 2 * GH;
      const A* rb = wb + GH;
      const A* pd = peep.data() + d * 3 * H;
      const Activation& f = acts_[static_cast<size_t>(d * per)];
      const Activation& g = acts_[static_cast<size_t>(d * per + (per > 1 ? 1 : 0))];
      const Activation& hact = acts_[static_cast<size_t>(d * per + (per > 2 ? 2 : 0))];
      // X·Wᵀ + Wb (+ Rb except GRU's h gate, whose recurrent bias sits inside the reset product).
      kern::parallel_for(S * B, ctx.threads(), 8, [&](int64_t lo, int64_t hi) {
        for (int64_t tb = lo; tb < hi; ++tb) {
          int64_t t = tb / B, b = tb % B;
          const A* xr = x.data() + x_off(t, b);
          A* out = xw.data() + tb * GH;
          for (int64_t j = 0; j < GH; ++j) {
            const A* wr = wd + j * I;
            A s = dot(xr, wr, I);
            bool skip_rb = cell_ == Cell::Gru && j >= 2 * H;
            out[j] = s + wb[j] + (skip_rb ? A(0) : rb[j]);
          }
        }
      });
      // Batch rows are independent: each thread walks whole sequences with its own scratch.
      kern::parallel_for(B, ctx.threads(), 1, [&](int64_t blo, int64_t bhi) {
        std::vector<A> hr(static_cast<size_t>(GH)), h(static_cast<size_t>(H)), c(static_cast<size_t>(H));
        std::vector<A> rh(static_cast<size_t>(H)), z(static_cast<size_t>(H)), rg(static_cast<size_t>(H));
        for (int64_t b = blo; b < bhi; ++b) {
          std::copy_n(h0.data() + h_off(d, b), H, h.data());
          std::copy_n(c0.data() + h_off(d, b), H, c.data());
          for (int64_t step = 0; step < lens[static_cast<size_t>(b)]; ++step) {
            int64_t t = rev ? lens[static_cast<size_t>(b)] - 1 - step : step;
            const A* pre = xw.data() + (t * B + b) * GH;
            // H·Rᵀ for the gates that use the plain hidden state.
            int64_t plain = cell_ == Cell::Gru && !linear_before_reset_ ? 2 * H : GH;
            for (int64_t j = 0; j < plain; ++j) {
              const A* rr = rd + j * H;
              A s = dot(h.data(), rr, H);
              hr[static_cast<size_t>(j)] = s;
            }
            auto clip = [&](A v) { return has_clip_ ? std::clamp(v, A(-clip_), A(clip_)) : v; };
            if (cell_ == Cell::Rnn) {
              for (int64_t j = 0; j < H; ++j) h[static_cast<size_t>(j)] = f(clip(pre[j] + hr[static_cast<size_t>(j)]));
            } else if (cell_ == Cell::Gru) {
              for (int64_t j = 0; j < H; ++j) {
                z[static_cast<size_t>(j)] = f(clip(pre[j] + hr[static_cast<size_t>(j)]));
                rg[static_cast<size_t>(j)] = f(clip(pre[H + j] + hr[static_cast<size_t>(H + j)]));
              }
              if (!linear_before_reset_) {
                for (int64_t k = 0; k < H; ++k) rh[static_cast<size_t>(k)] = rg[static_cast<size_t>(k)] * h[static_cast<size_t>(k)];
                for (int64_t j = 0; j < H; ++j) {
                  const A* rr = rd + (2 * H + j) * H;
                  A s = dot(rh.data(), rr, H);
                  hr[static_cast<size_t>(2 * H + j)] = s + rb[2 * H + j];
                }
              } else {
                for (int64_t j = 0; j < H; ++j)
                  hr[static_cast<size_t>(2 * H + j)] = rg[static_cast<size_t>(j)] * (hr[static_cast<size_t>(2 * H + j)] + rb[2 * H + j]);
              }
              for (int64_t j = 0; j < H; ++j) {
                A ht = g(clip(pre[2 * H + j] + hr[static_cast<size_t>(2 * H + j)]));
                A zj = z[static_cast<size_t>(j)];
                h[static_cast<size_t>(j)] = (A(1) - zj) * ht + zj * h[static_cast<size_t>(j)];
              }
            } else {
              for (int64_t j = 0; j < H; ++j) {
                size_t u = static_cast<size_t>(j);
                A cp = c[u];
                A ig = f(clip(pre[j] + hr[u] + pd[j] * cp));
                A fg = input_forget_ ? A(1) - ig : f(clip(pre[2 * H + j] + hr[u + 2 * H] + pd[2 * H + j] * cp));
                A cg = g(clip(pre[3 * H + j] + hr[u + 3 * H]));
                A cn = fg * cp + ig * cg;
                A og = f(clip(pre[H + j] + hr[u + H] + pd[H + j] * cn));
                c[u] = cn;
                h[u] = og * hact(cn);
              }
            }
            std::copy_n(h.data(), H, y.data() + y_off(t, d, b));
          }
          std::copy_n(h.data(), H, yh.data() + h_off(d, b));
          std::copy_n(c.data(), H, yc.data() + h_off(d, b));
        }
      });
    }
    DType dt = X.dtype();
    if (ctx.has_output(0)) from_acc(y, ctx.allocate_output(0, dt, y_dims));
    if (ctx.has_output(1)) from_acc(yh, ctx.allocate_output(1, dt, state_dims));
    if (cell_ == Cell::Lstm && ctx.has_output(2)) from_acc(yc, ctx.allocate_output(2, dt, state_dims));
  }

  // The fast path takes the cells with ONNX's default activations (any of Tanh, Relu, Sigmoid
  // for RNN) and no coupled input-forget gate, on CPUs with AVX-512.
  void make_fast_path(const KernelInfo& info, const std::vector<std::string>& dflt) {
    if (input_forget_ || !__builtin_cpu_supports("avx512f")) return;
    // int8 products need VNNI, and the fused bias is kept: a computed B takes the reference kernel.
    if (int8_ && (!kern::rnn_int8_supported() ||
                  (info.node.inputs.size() > 3 && !info.node.inputs[3].empty() && !info.constant_input(3))))
      return;
    kern::RnnFastSpec spec;
    spec.dirs = num_dirs_;
    spec.reverse = reverse_only_;
    spec.batch_first = layout_ == 1;
    spec.has_clip = has_clip_;
    spec.clip = clip_;
    for (const Activation& a : acts_)
      if (a.alpha != 0 || a.beta != 0) return;
    if (cell_ == Cell::Rnn) {
      Act a = acts_[0].kind;
      if (num_dirs_ == 2 && acts_[1].kind != a) return;
      if (a != Act::Tanh && a != Act::Relu && a != Act::Sigmoid) return;
      spec.cell = kern::RnnFastSpec::Cell::Rnn;
      spec.act = a == Act::Tanh      ? kern::RnnFastSpec::Act::Tanh
                 : a == Act::Relu    ? kern::RnnFastSpec::Act::Relu
                                     : kern::RnnFastSpec::Act::Sigmoid;
    } else {
      for (size_t i = 0; i < acts_.size(); ++i)
        if (acts_[i].kind != (dflt[i % dflt.size()] == "Sigmoid" ? Act::Sigmoid : Act::Tanh)) return;
      spec.cell = cell_ == Cell::Lstm       ? kern::RnnFastSpec::Cell::Lstm
                  : linear_before_reset_ ? kern::RnnFastSpec::Cell::LbrGru
                                         : kern::RnnFastSpec::Cell::Gru;
    }
    fast_ = std::make_unique<kern::RnnFast>(spec);
    if (int8_) return fast_->set_int8_weights(wq_, ws_, rq_, rs_);
    bool constant = info.constant_input(1) && info.constant_input(2);
    if (info.node.inputs.size() > 3 && !info.node.inputs[3].empty() && !info.constant_input(3)) constant = false;
    fast_->set_constant_weights(constant);
  }

  // Float32 inputs in valid shapes (anything else goes to the reference kernel, which runs it or
  // explains what is wrong).
  bool run_fast(KernelContext& ctx) {
    auto f32 = [&](int i) { return !ctx.has_input(i) || ctx.input(i).dtype() == DType::Float; };
    for (int i : {0, 1, 2, 3, 5, 6, 7})
      if (!f32(i) && !(int8_ && (i == 1 || i == 2))) return false;
    const Tensor& X = ctx.input(0);
    const Tensor& W = ctx.input(1);
    const Tensor& R = ctx.input(2);
    const int64_t D = num_dirs_, G = gates_;
    if (X.rank() != 3 || W.rank() != 3 || R.rank() != 3) return false;
    int64_t S = layout_ == 0 ? X.dim(0) : X.dim(1), B = layout_ == 0 ? X.dim(1) : X.dim(0), I = X.dim(2);
    int64_t H = hidden_ > 0 ? hidden_ : R.dim(2);
    if (H <= 0 || S <= 0 || B <= 0 || I <= 0 || W.dims() != Dims{D, G * H, I} || R.dims() != Dims{D, G * H, H})
      return false;  // empty sequences and batches: the reference kernel
    Dims state_dims = layout_ == 0 ? Dims{D, B, H} : Dims{B, D, H};
    bool lstm = cell_ == Cell::Lstm;
    if (ctx.has_input(3) && ctx.input(3).dims() != Dims{D, 2 * G * H}) return false;
    if (ctx.has_input(5) && ctx.input(5).dims() != state_dims) return false;
    if (lstm && ctx.has_input(6) && ctx.input(6).dims() != state_dims) return false;
    if (lstm && ctx.has_input(7) && ctx.input(7).dims() != Dims{D, 3 * H}) return false;
    std::vector<int64_t> lens;
    if (ctx.has_input(4)) {
      const Tensor& L = ctx.input(4);
      if (L.numel() != B) return false;
      lens = kern::to_int_vector(L);
      for (int64_t l : lens)
        if (l < 0 || l > S) return false;
    }
    auto opt = [&](int i) { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
    Dims y_dims = layout_ == 0 ? Dims{S, D, B, H} : Dims{B, S, D, H};
    Tensor* y = ctx.has_output(0) ? &ctx.allocate_output_uninit(0, DType::Float, y_dims) : nullptr;
    Tensor* yh = ctx.has_output(1) ? &ctx.allocate_output_uninit(1, DType::Float, state_dims) : nullptr;
    Tensor* yc = lstm && ctx.has_output(2) ? &ctx.allocate_output_uninit(2, DType::Float, state_dims) : nullptr;
    fast_->run(X, W, R, opt(3), lens, opt(5), lstm ? opt(6) : nullptr, lstm ? opt(7) : nullptr, H, ctx.threads(), y, yh,
               yc);
    return true;
  }

  Cell cell_;
  bool int8_ = false;
  Tensor wq_, ws_, rq_, rs_;      // int8: the constant weights and scales
  std::once_flag dequantize_once_;
  Tensor w_float_, r_float_;      // int8: the weights as float, for the reference kernel
  std::unique_ptr<kern::RnnFast> fast_;
  int64_t gates_ = 1;
  int num_dirs_ = 1;
  bool reverse_only_ = false;
  int64_t hidden_ = -1;
  float clip_ = 0;
  bool has_clip_ = false;
  int64_t layout_ = 0;
  bool input_forget_ = false;
  bool linear_before_reset_ = false;
  std::vector<Activation> acts_;
};

KernelFactory recurrent(Cell c, bool int8 = false) {
  return [c, int8](const KernelInfo& info) { return std::make_unique<RecurrentKernel>(info, c, int8); };
}

}  // namespace

void register_rnn_kernels(KernelRegistry& r) {
  r.add("", "RNN", 1, recurrent(Cell::Rnn));
  r.add("", "RNN", 14, recurrent(Cell::Rnn));   // adds layout
  r.add("", "GRU", 1, recurrent(Cell::Gru));
  r.add("", "GRU", 14, recurrent(Cell::Gru));
  r.add("", "LSTM", 1, recurrent(Cell::Lstm));
  r.add("", "LSTM", 14, recurrent(Cell::Lstm));
  // The runtime's int8 forms (runtime/optimize.h): the same inputs with int8 W and R, scales last.
  r.add(kInternalDomain, "Int8RNN", 1, recurrent(Cell::Rnn, true));
  r.add(kInternalDomain, "Int8GRU", 1, recurrent(Cell::Gru, true));
  r.add(kInternalDomain, "Int8LSTM", 1, recurrent(Cell::Lstm, true));
}

}  // namespace t2o
