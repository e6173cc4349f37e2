#include "runtime/kernels/rnn_fast.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/matmul_util.h"

namespace t2o::kern {

using Cell = RnnFastSpec::Cell;

namespace {

constexpr int64_t U = 16;  // hidden units per panel: one AVX-512 register per gate

std::atomic<uint64_t> runs{0};
std::atomic<uint64_t> int8_runs{0};

int64_t gates_of(Cell c) { return c == Cell::Rnn ? 1 : c == Cell::Lstm ? 4 : 3; }

// Threads of one layer meet here once per step. A step takes microseconds, so waiting threads
// spin (pausing) for a while before they yield the core to whatever else needs it.
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  void wait() {
    if (n_ == 1) return;
    int gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) == n_ - 1) {
      count_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_release);
      return;
    }
    for (int spins = 0; gen_.load(std::memory_order_acquire) == gen; ++spins) {
      if (spins < 2000) _mm_pause();
      else std::this_thread::yield();
    }
  }

 private:
  int n_;
  std::atomic<int> count_{0};
  std::atomic<int> gen_{0};
};

// R [G*H, H] of one direction as panels of U units: panel q, row k holds gates 0..G-1 of units
// q*U .. q*U+U-1 (zeros past H), so a step reads each thread's panels front to back.
Tensor pack_panels(const float* r, int64_t G, int64_t H) {
  int64_t P = (H + U - 1) / U;
  Tensor out(DType::Float, {P * H * G * U});
  for (int64_t q = 0; q < P; ++q)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t u = 0; u < U && q * U + u < H; ++u) {
        const float* row = r + (g * H + q * U + u) * H;
        float* dst = out.data<float>() + q * H * G * U + g * U + u;
        for (int64_t k = 0; k < H; ++k) dst[k * G * U] = row[k];
      }
  return out;
}

// ---- AVX-512 pieces -------------------------------------------------------------------------

T2O_AVX512_WARNINGS_OFF

// tanh(x) = 1 - 2 / (exp(2x) + 1), exact to ~1e-7 absolute.
T2O_AVX512 inline __m512 tanh512(__m512 x) {
  __m512 one = _mm512_set1_ps(1.0f);
  __m512 e = exp512(_mm512_add_ps(x, x));
  return _mm512_fnmadd_ps(_mm512_set1_ps(2.0f), recip512(_mm512_add_ps(e, one)), one);
}

// acc[b][g] = sum_k h[b][k] * panel[k][g0 + g] for NB rows and GN of the panel's G gates; row b
// of acc is ld gates long.
template <int GN, int NB>
T2O_AVX512 void panel_gemv(const float* panel, int64_t K, int64_t G, int64_t g0, const float* const* h, float* acc,
                           int64_t ld) {
  __m512 a[NB][GN];
  for (int b = 0; b < NB; ++b)
    for (int g = 0; g < GN; ++g) a[b][g] = _mm512_setzero_ps();
  const float* row = panel + g0 * U;
  for (int64_t k = 0; k < K; ++k, row += G * U) {
    __m512 w[GN];
    for (int g = 0; g < GN; ++g) w[g] = _mm512_load_ps(row + g * U);
    for (int b = 0; b < NB; ++b) {
      __m512 hb = _mm512_set1_ps(h[b][k]);
      for (int g = 0; g < GN; ++g) a[b][g] = _mm512_fmadd_ps(hb, w[g], a[b][g]);
    }
  }
  for (int b = 0; b < NB; ++b)
    for (int g = 0; g < GN; ++g) _mm512_storeu_ps(acc + (b * ld + g) * U, a[b][g]);
}

constexpr int kMaxRows = 8;  // rows of h per pass over a panel

// Calls f(std::integral_constant<int, GN>{}, std::integral_constant<int, NB>{}, g) for the gate
// groups [g, g + GN) of gn gates and nb <= kMaxRows rows. Each pass keeps at most 16 accumulators
// in registers: up to 4 rows take all gates at once, more rows take the gates two at a time
// (reading a panel row once per 16 multiply-adds either way).
template <typename F>
void for_gate_groups(int64_t gn, int nb, F&& f) {
  const int64_t group = nb <= 4 ? gn : std::min<int64_t>(gn, 2);
  for (int64_t g = 0; g < gn; g += group) {
    auto rows = [&](auto GNc) {
      constexpr int GN = decltype(GNc)::value;
      using std::integral_constant;
      switch (nb) {
        case 1: return f(GNc, integral_constant<int, 1>{}, g);
        case 2: return f(GNc, integral_constant<int, 2>{}, g);
        case 3: return f(GNc, integral_constant<int, 3>{}, g);
        case 4: return f(GNc, integral_constant<int, 4>{}, g);
        default:
          if constexpr (GN <= 2) {
            switch (nb) {
              case 5: return f(GNc, integral_constant<int, 5>{}, g);
              case 6: return f(GNc, integral_constant<int, 6>{}, g);
              case 7: return f(GNc, integral_constant<int, 7>{}, g);
              default: return f(GNc, integral_constant<int, 8>{}, g);
            }
          }
      }
    };
    switch (std::min(group, gn - g)) {
      case 1: rows(std::integral_constant<int, 1>{}); break;
      case 2: rows(std::integral_constant<int, 2>{}); break;
      case 3: rows(std::integral_constant<int, 3>{}); break;
      default: rows(std::integral_constant<int, 4>{}); break;
    }
  }
}

// Gates g0 .. g0+gn-1 of one panel for nb <= kMaxRows rows: acc[(b * gn + g) * U + u].
void gemv(const float* panel, int64_t K, int64_t G, int64_t g0, int64_t gn, const float* const* h, int nb, float* acc) {
  for_gate_groups(gn, nb, [&](auto GNc, auto NBc, int64_t g) {
    panel_gemv<decltype(GNc)::value, decltype(NBc)::value>(panel, K, G, g0 + g, h, acc + g * U, gn);
  });
}

// What the gate updates of one row and one panel read and write. Pointers are at the panel's
// first unit; `mask` covers the units below H.
struct UnitBlock {
  const float* pre;     // X·Wᵀ + biases, gate g at pre[g * H]
  const float* acc;     // the recurrent products, gate g at acc[g * U]
  int64_t H;
  __mmask16 mask;
  const float* peep;    // LSTM peepholes (i, o, f at peep[0], [H], [2H]) or null
  const float* rbh;     // linear-before-reset GRU: Rb of the h gate
  float* c;             // LSTM cell state, updated in place
  const float* h;       // hidden state before the step
  float* h_next;        // after it
  float* y;             // Y's row for this step, or null
  bool has_clip;
  float clip;
};

T2O_AVX512 inline __m512 gate_in(const UnitBlock& u, int g, __m512 extra) {
  __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(u.mask, u.pre + g * u.H), _mm512_loadu_ps(u.acc + g * U));
  v = _mm512_add_ps(v, extra);
  if (u.has_clip) v = clamp512(v, _mm512_set1_ps(-u.clip), _mm512_set1_ps(u.clip));
  return v;
}

T2O_AVX512 inline void store_h(const UnitBlock& u, __m512 h) {
  _mm512_mask_storeu_ps(u.h_next, u.mask, h);
  if (u.y) _mm512_mask_storeu_ps(u.y, u.mask, h);
}

// Peephole k (i o f) times the cell state s, or zero without peepholes.
T2O_AVX512 inline __m512 peep(const UnitBlock& u, int k, __m512 s) {
  return u.peep ? _mm512_mul_ps(_mm512_maskz_loadu_ps(u.mask, u.peep + k * u.H), s) : _mm512_setzero_ps();
}

// ONNX LSTM, gates i o f c.
T2O_AVX512 void lstm_units(const UnitBlock& u) {
  __m512 z = _mm512_setzero_ps();
  __m512 c = _mm512_maskz_loadu_ps(u.mask, u.c);
  __m512 i = sigmoid512(gate_in(u, 0, peep(u, 0, c)));
  __m512 f = sigmoid512(gate_in(u, 2, peep(u, 2, c)));
  __m512 g = tanh512(gate_in(u, 3, z));
  __m512 cn = _mm512_fmadd_ps(f, c, _mm512_mul_ps(i, g));
  __m512 o = sigmoid512(gate_in(u, 1, peep(u, 1, cn)));
  _mm512_mask_storeu_ps(u.c, u.mask, cn);
  store_h(u, _mm512_mul_ps(o, tanh512(cn)));
}

// ONNX GRU, gates z r h, linear before reset: h~ = tanh(xh + r * (h·Rhᵀ + Rbh)).
T2O_AVX512 void lbr_gru_units(const UnitBlock& u) {
  __m512 z = _mm512_setzero_ps();
  __m512 zg = sigmoid512(gate_in(u, 0, z));
  __m512 r = sigmoid512(gate_in(u, 1, z));
  __m512 rec = _mm512_add_ps(_mm512_loadu_ps(u.acc + 2 * U), _mm512_maskz_loadu_ps(u.mask, u.rbh));
  __m512 v = _mm512_fmadd_ps(r, rec, _mm512_maskz_loadu_ps(u.mask, u.pre + 2 * u.H));
  if (u.has_clip) v = clamp512(v, _mm512_set1_ps(-u.clip), _mm512_set1_ps(u.clip));
  __m512 hh = tanh512(v);
  // (1 - z) * h~ + z * h
  store_h(u, _mm512_fmadd_ps(zg, _mm512_sub_ps(_mm512_maskz_loadu_ps(u.mask, u.h), hh), hh));
}

// The reset-before-product GRU in two halves. First z and r from h·Rᵀ (gates 0 and 1 of acc),
// keeping z and r * h for the second product.
T2O_AVX512 void gru_first(const UnitBlock& u, float* zs, float* rh) {
  __m512 z = _mm512_setzero_ps();
  _mm512_mask_storeu_ps(zs, u.mask, sigmoid512(gate_in(u, 0, z)));
  __m512 r = sigmoid512(gate_in(u, 1, z));
  _mm512_mask_storeu_ps(rh, u.mask, _mm512_mul_ps(r, _mm512_maskz_loadu_ps(u.mask, u.h)));
}
// Then h~ = tanh(xh + (r * h)·Rhᵀ + Rbh) (acc holds the product; Rbh is part of pre).
T2O_AVX512 void gru_second(const UnitBlock& u, const float* zs) {
  __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(u.mask, u.pre + 2 * u.H), _mm512_loadu_ps(u.acc));
  if (u.has_clip) v = clamp512(v, _mm512_set1_ps(-u.clip), _mm512_set1_ps(u.clip));
  __m512 hh = tanh512(v);
  __m512 zg = _mm512_maskz_loadu_ps(u.mask, zs);
  store_h(u, _mm512_fmadd_ps(zg, _mm512_sub_ps(_mm512_maskz_loadu_ps(u.mask, u.h), hh), hh));
}

T2O_AVX512 void rnn_units(const UnitBlock& u, RnnFastSpec::Act act) {
  __m512 v = gate_in(u, 0, _mm512_setzero_ps());
  __m512 h = act == RnnFastSpec::Act::Tanh      ? tanh512(v)
             : act == RnnFastSpec::Act::Sigmoid ? sigmoid512(v)
                                                : relu512(v);
  store_h(u, h);
}

T2O_AVX512_WARNINGS_ON

// ---- int8 products (AVX-512 VNNI) -----------------------------------------------------------
//
// A weight [G*H, K] of one direction as panels of U units, 4 consecutive k per 32-bit lane:
// panel q, block k4 holds, for each gate g, the bytes w[g*H + q*U + u][4*k4 + e] at
// ((k4 * G + g) * U + u) * 4 + e (zeros past H and past K). vpdpbusd multiplies 4 uint8
// activations by those 4 int8 weights and adds the sum to lane u exactly in int32.
// Activations are stored as q + 128 (q in [-127, 127], a per-row scale), so a lane's sum is
// x_q . w + 128 * colsum(w); the epilogue takes the colsum term off and scales to float.
struct Int8Panels {
  Tensor bytes;                 // P * K4 * G * U * 4
  std::vector<float> scale;     // per (panel, gate, unit): the weight's scale (0 past H)
  std::vector<int32_t> colsum;  // same index: sum over k of the weights
  int64_t K4 = 0;
};

Int8Panels pack_int8(const int8_t* w, const Tensor& ws, int64_t G, int64_t H, int64_t K) {
  const int64_t P = (H + U - 1) / U;
  Int8Panels p;
  p.K4 = (K + 3) / 4;
  p.bytes = Tensor(DType::Int8, {P * p.K4 * G * U * 4});
  p.scale.assign(static_cast<size_t>(P * G * U), 0.0f);
  p.colsum.assign(static_cast<size_t>(P * G * U), 0);
  int8_t* dst = p.bytes.data<int8_t>();
  for (int64_t q = 0; q < P; ++q)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t u = 0; u < U && q * U + u < H; ++u) {
        const int64_t j = g * H + q * U + u;
        const size_t at = static_cast<size_t>((q * G + g) * U + u);
        p.scale[at] = static_cast<float>(ws.as_double(ws.numel() == 1 ? 0 : j));
        const int8_t* row = w + j * K;
        int32_t sum = 0;
        for (int64_t k = 0; k < K; ++k) {
          dst[(((q * p.K4 + k / 4) * G + g) * U + u) * 4 + k % 4] = row[k];
          sum += row[k];
        }
        p.colsum[at] = sum;
      }
  return p;
}

#define T2O_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))
T2O_AVX512_WARNINGS_OFF

// x[0, K) as bytes q + 128 with q = round(x / s) in [-127, 127], s = max |x| / 127, into
// dst[0, 4 * K4) (padding 128); returns s (NaN when x has a NaN or an infinity, which then
// reaches every product of the row).
T2O_VNNI float quantize_row(const float* x, int64_t K, int64_t K4, uint8_t* dst) {
  __m512 mx = _mm512_setzero_ps();
  __mmask16 bad = 0;
  int64_t k = 0;
  for (; k < K; k += U) {
    __mmask16 m = static_cast<__mmask16>(K - k >= U ? 0xFFFF : (1u << (K - k)) - 1);
    __m512 v = _mm512_maskz_loadu_ps(m, x + k);
    bad |= _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(3.4028235e38f), _CMP_NLE_UQ);
    mx = _mm512_max_ps(mx, _mm512_abs_ps(v));
  }
  float amax = _mm512_reduce_max_ps(mx);
  if (bad) return std::numeric_limits<float>::quiet_NaN();
  // A row of zeros (or of values so small that 1 / s would overflow) keeps s = 1: it quantizes to 0.
  const float s = amax > 1e-30f ? amax / 127.0f : 1.0f;
  const __m512 inv = _mm512_set1_ps(1.0f / s);
  const __m512i off = _mm512_set1_epi32(128), lo = _mm512_set1_epi32(1), hi = _mm512_set1_epi32(255);
  for (k = 0; k < 4 * K4; k += U) {
    const int64_t n = std::min<int64_t>(U, 4 * K4 - k);
    const __mmask16 store = static_cast<__mmask16>(n >= U ? 0xFFFF : (1u << n) - 1);
    const __mmask16 m = K - k <= 0 ? 0 : static_cast<__mmask16>(K - k >= U ? 0xFFFF : (1u << (K - k)) - 1);
    // Rounded to nearest even (the default mode), clamped: x / s is within [-127, 127] up to
    // the rounding of 1 / s.
    __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + k), inv)), off);
    q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
    _mm512_mask_cvtepi32_storeu_epi8(dst + k, store, q);
  }
  return s;
}

// acc[b][g] (float) = s_b * ws * (sum_k xq[b][k] * w[k][g]) for NB rows and GN of the panel's G
// gates; row b of acc is ld gates long.
template <int GN, int NB>
T2O_VNNI void panel_gemv_s8(const int8_t* panel, const float* scale, const int32_t* colsum, int64_t K4, int64_t G,
                            int64_t g0, const uint8_t* const* x, const float* xs, float* acc, int64_t ld) {
  // With few rows, even and odd k4 sum into separate accumulators: enough independent chains to
  // keep both multiply-add pipes busy (one row's 4 gates alone would wait on latency).
  constexpr int C = NB * GN < 8 ? 2 : 1;
  __m512i a[C][NB][GN];
  for (int c = 0; c < C; ++c)
    for (int b = 0; b < NB; ++b)
      for (int g = 0; g < GN; ++g) a[c][b][g] = _mm512_setzero_si512();
  const int8_t* row = panel + g0 * U * 4;
  for (int64_t k4 = 0; k4 < K4; k4 += C) {
    for (int c = 0; c < C && k4 + c < K4; ++c, row += G * U * 4) {
      __m512i w[GN];
      for (int g = 0; g < GN; ++g) w[g] = _mm512_load_si512(row + g * U * 4);
      for (int b = 0; b < NB; ++b) {
        int32_t four;
        std::memcpy(&four, x[b] + 4 * (k4 + c), 4);
        __m512i xb = _mm512_set1_epi32(four);
        for (int g = 0; g < GN; ++g) a[c][b][g] = _mm512_dpbusd_epi32(a[c][b][g], xb, w[g]);
      }
    }
  }
  if constexpr (C == 2)
    for (int b = 0; b < NB; ++b)
      for (int g = 0; g < GN; ++g) a[0][b][g] = _mm512_add_epi32(a[0][b][g], a[1][b][g]);
  for (int g = 0; g < GN; ++g) {
    __m512i off = _mm512_slli_epi32(_mm512_loadu_si512(colsum + (g0 + g) * U), 7);  // 128 * colsum
    __m512 sc = _mm512_loadu_ps(scale + (g0 + g) * U);
    for (int b = 0; b < NB; ++b) {
      __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(a[0][b][g], off));
      _mm512_storeu_ps(acc + (b * ld + g) * U, _mm512_mul_ps(v, _mm512_mul_ps(sc, _mm512_set1_ps(xs[b]))));
    }
  }
}

T2O_AVX512_WARNINGS_ON

// gemv's int8 twin: gates g0 .. g0+gn-1 of panel q for nb <= kMaxRows quantized rows.
void gemv_s8(const Int8Panels& w, int64_t q, int64_t G, int64_t g0, int64_t gn, const uint8_t* const* x,
             const float* xs, int nb, float* acc) {
  const int8_t* panel = w.bytes.data<int8_t>() + q * w.K4 * G * U * 4;
  const float* scale = w.scale.data() + q * G * U;
  const int32_t* colsum = w.colsum.data() + q * G * U;
  for_gate_groups(gn, nb, [&](auto GNc, auto NBc, int64_t g) {
    panel_gemv_s8<decltype(GNc)::value, decltype(NBc)::value>(panel, scale, colsum, w.K4, G, g0 + g, x, xs, acc + g * U, gn);
  });
}

}  // namespace

struct RnnFast::Impl {
  RnnFastSpec spec;
  bool constant = false;
  std::mutex mu;
  // Per direction, made on the first run when the weights are constant.
  std::vector<std::shared_ptr<DnnlMatmul>> proj;
  std::vector<Tensor> panels;
  std::vector<Tensor> bias;  // Wb + Rb per gate (Wb only for the linear-before-reset h gate)
  // int8 mode: the constant weights as given, and their panels per direction (made on the first run).
  bool int8 = false;
  Tensor wq, ws, rq, rs;
  std::vector<Int8Panels> wpan, rpan;
  // The input projections of the last run, kept for the next (a fresh multi-megabyte buffer per
  // run fragments the heap: resident memory grew run after run). Taken under `mu`; a run that
  // finds it taken (another thread's) allocates its own.
  Tensor pre;
};

RnnFast::RnnFast(const RnnFastSpec& spec) : impl_(std::make_unique<Impl>()) { impl_->spec = spec; }
RnnFast::~RnnFast() = default;
void RnnFast::set_constant_weights(bool constant) { impl_->constant = constant; }
void RnnFast::set_int8_weights(const Tensor& wq, const Tensor& ws, const Tensor& rq, const Tensor& rs) {
  impl_->int8 = true;
  impl_->constant = true;
  impl_->wq = wq;
  impl_->ws = ws;
  impl_->rq = rq;
  impl_->rs = rs;
}

void RnnFast::run(const Tensor& x, const Tensor& w, const Tensor& r, const Tensor* b, const std::vector<int64_t>& lens,
                  const Tensor* h0, const Tensor* c0, const Tensor* p, int64_t H, int threads, Tensor* y, Tensor* yh,
                  Tensor* yc) {
  Impl& m = *impl_;
  const RnnFastSpec& sp = m.spec;
  const Cell cell = sp.cell;
  const bool lstm = cell == Cell::Lstm, lbr = cell == Cell::LbrGru, gru = cell == Cell::Gru;
  const int64_t D = sp.dirs, G = gates_of(cell), GH = G * H;
  const bool bf = sp.batch_first;
  const int64_t S = bf ? x.dim(1) : x.dim(0), B = bf ? x.dim(0) : x.dim(1), I = x.dim(2);
  const int64_t P = (H + U - 1) / U, Hp = P * U;
  auto len = [&](int64_t row) { return lens.empty() ? S : lens[static_cast<size_t>(row)]; };

  // Packed weights and fused biases, per direction.
  std::vector<std::shared_ptr<DnnlMatmul>> proj_v;
  std::vector<Tensor> panels_v, bias_v;
  std::unique_lock<std::mutex> lock(m.mu);
  const bool int8 = m.int8;
  bool cached = m.constant && !m.bias.empty();
  if (!cached) {
    for (int64_t d = 0; d < D; ++d) {
      Tensor bs(DType::Float, {GH + H});  // fused bias, then Rbh for the linear-before-reset GRU
      float* bp = bs.data<float>();
      if (b) {
        const float* wb = b->data<float>() + d * 2 * GH;
        const float* rb = wb + GH;
        for (int64_t j = 0; j < GH; ++j) bp[j] = wb[j] + (lbr && j >= 2 * H ? 0.0f : rb[j]);
        if (lbr) std::copy_n(rb + 2 * H, H, bp + GH);
      }
      bias_v.push_back(std::move(bs));
      if (int8) {
        m.wpan.push_back(pack_int8(m.wq.data<int8_t>() + d * GH * I, m.ws, G, H, I));
        m.rpan.push_back(pack_int8(m.rq.data<int8_t>() + d * GH * H, m.rs, G, H, H));
        continue;
      }
      // A constant W is packed by the matmul, which keeps a view of the plain one: constant
      // inputs live as long as the session that owns this kernel.
      Tensor wd;
      if (m.constant) wd = Tensor::borrow(DType::Float, {GH, I}, const_cast<float*>(w.data<float>()) + d * GH * I);
      proj_v.push_back(dnnl_matmul_make(false, true, 1.0f, m.constant ? &wd : nullptr));
      panels_v.push_back(pack_panels(r.data<float>() + d * GH * H, G, H));
    }
    if (m.constant) {
      m.proj = std::move(proj_v);
      m.panels = std::move(panels_v);
      m.bias = std::move(bias_v);
    }
  }
  const auto& proj = m.constant ? m.proj : proj_v;
  const auto& panels = m.constant ? m.panels : panels_v;
  const auto& bias = m.constant ? m.bias : bias_v;
  Tensor pre_t = std::move(m.pre);
  m.pre = Tensor();
  lock.unlock();
  if (!pre_t.defined() || pre_t.numel() < S * B * GH) pre_t = Tensor::uninitialized(DType::Float, {S * B * GH});
  struct GiveBack {
    Impl& m;
    Tensor& t;
    ~GiveBack() {
      std::lock_guard<std::mutex> g(m.mu);
      if (!m.pre.defined() || m.pre.numel() < t.numel()) m.pre = std::move(t);
    }
  } give_back{m, pre_t};

  // State offsets in the ONNX tensors: [D, B, H], or [B, D, H] batch first.
  auto st = [&](int64_t d, int64_t row) { return bf ? (row * D + d) * H : (d * B + row) * H; };
  auto y_row = [&](int64_t t, int64_t d, int64_t row) { return bf ? ((row * S + t) * D + d) * H : ((t * D + d) * B + row) * H; };
  if (y) std::memset(y->raw(), 0, static_cast<size_t>(y->numel()) * sizeof(float));

  const int T = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, P)));
  // Hidden states double-buffered (threads read all of h while others write theirs), rows padded
  // to whole panels; the cell state, and GRU's z and r * h, are per unit.
  Tensor state(DType::Float, {5 * B * Hp});
  float* pre = pre_t.data<float>();
  float* hbuf = state.data<float>();
  float* cbuf = hbuf + 2 * B * Hp;
  float* rh = cbuf + B * Hp;
  float* zbuf = rh + B * Hp;
  // int8: X's rows quantized once for both directions; each thread's h rows before each product.
  const int64_t K4x = (I + 3) / 4, K4h = (H + 3) / 4;
  std::vector<uint8_t> xq;
  std::vector<float> xs;
  if (int8) {
    xq.resize(static_cast<size_t>(S * B * 4 * K4x));
    xs.resize(static_cast<size_t>(S * B));
    parallel_for(S * B, threads, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row)
        xs[static_cast<size_t>(row)] = quantize_row(x.data<float>() + row * I, I, K4x, xq.data() + row * 4 * K4x);
    });
  }
  for (int64_t d = 0; d < D; ++d) {
    const bool rev = sp.reverse || d == 1;
    // pre[row of X] = X·Wᵀ + bias, rows in X's own order ((t, b), or (b, t) batch first).
    const float* bd = bias[static_cast<size_t>(d)].data<float>();
    if (int8) {
      // Panel by panel (its weights stay in cache), four rows at a time with all gates.
      const Int8Panels& wp = m.wpan[static_cast<size_t>(d)];
      parallel_for(P, threads, 1, [&](int64_t q0, int64_t q1) {
        alignas(64) float acc[4 * 4 * U];
        const uint8_t* rows[4];
        for (int64_t q = q0; q < q1; ++q) {
          const int64_t j0 = q * U, nu = std::min<int64_t>(U, H - j0);
          for (int64_t r0 = 0; r0 < S * B; r0 += 4) {
            const int nb = static_cast<int>(std::min<int64_t>(4, S * B - r0));
            for (int k = 0; k < nb; ++k) rows[k] = xq.data() + (r0 + k) * 4 * K4x;
            gemv_s8(wp, q, G, 0, G, rows, xs.data() + r0, nb, acc);
            for (int k = 0; k < nb; ++k)
              for (int64_t g = 0; g < G; ++g) {
                float* dst = pre + (r0 + k) * GH + g * H + j0;
                const float* src = acc + (k * G + g) * U;
                for (int64_t u = 0; u < nu; ++u) dst[u] = src[u] + bd[g * H + j0 + u];
              }
          }
        }
      });
    } else if (const float* wd = w.data<float>() + d * GH * I;
               !dnnl_matmul_run(*proj[static_cast<size_t>(d)], 1, 1, S * B, I, GH, x.data<float>(), m.constant ? nullptr : wd,
                         bd, 0.0f, pre)) {
      for (int64_t row = 0; row < S * B; ++row)
        for (int64_t j = 0; j < GH; ++j) {
          const float* xr = x.data<float>() + row * I;
          float s = bd[j];
          for (int64_t k = 0; k < I; ++k) s += xr[k] * wd[j * I + k];
          pre[row * GH + j] = s;
        }
    }
    auto pre_row = [&](int64_t t, int64_t row) { return pre + (bf ? row * S + t : t * B + row) * GH; };
    std::fill_n(hbuf, 3 * B * Hp, 0.0f);  // h (both buffers) and c
    for (int64_t row = 0; row < B; ++row) {
      if (h0) std::copy_n(h0->data<float>() + st(d, row), H, hbuf + row * Hp);
      if (c0) std::copy_n(c0->data<float>() + st(d, row), H, cbuf + row * Hp);
    }
    const float* panel0 = int8 ? nullptr : panels[static_cast<size_t>(d)].data<float>();
    const Int8Panels* rpan = int8 ? &m.rpan[static_cast<size_t>(d)] : nullptr;
    const float* rbh = bias[static_cast<size_t>(d)].data<float>() + GH;
    const float* peep = p ? p->data<float>() + d * 3 * H : nullptr;
    int64_t steps = 0;
    for (int64_t row = 0; row < B; ++row) steps = std::max(steps, len(row));

    auto work = [&](int tid, int team, SpinBarrier& barrier) {
      const int64_t q0 = P * tid / team, q1 = P * (tid + 1) / team;
      alignas(64) float acc[kMaxRows * 4 * U];
      const float* hrows[kMaxRows];
      // int8: the rows of h (or GRU's r * h) quantized, B rows of 4 * K4h bytes, and their scales.
      std::vector<uint8_t> hq(int8 ? static_cast<size_t>(B * 4 * K4h) : 0);
      std::vector<float> hs(int8 ? static_cast<size_t>(B) : 0);
      const uint8_t* qrows[kMaxRows];
      auto quantize_state = [&](const float* src) {
        for (int64_t row = 0; row < B; ++row)
          hs[static_cast<size_t>(row)] = quantize_row(src + row * Hp, H, K4h, hq.data() + row * 4 * K4h);
      };
      // Gates g0 .. g0+gn-1 of panel q for rows r0 .. r0+nb-1 of src (h or r * h) into acc.
      auto product = [&](int64_t q, int64_t g0, int64_t gn, const float* src, int64_t r0, int nb) {
        if (int8) {
          for (int k = 0; k < nb; ++k) qrows[k] = hq.data() + (r0 + k) * 4 * K4h;
          gemv_s8(*rpan, q, G, g0, gn, qrows, hs.data() + r0, nb, acc);
          return;
        }
        for (int k = 0; k < nb; ++k) hrows[k] = src + (r0 + k) * Hp;
        gemv(panel0 + q * H * G * U, H, G, g0, gn, hrows, nb, acc);
      };
      // Runs f(q, j0, mask, r0, nb) for this thread's panels, then for each chunk of rows.
      // Panels go in alternating order from pass to pass: a thread's share of R is often a
      // little larger than its cache, and a pass that starts where the last one ended finds
      // that end still cached.
      bool forward = true;
      auto each_block = [&](auto&& f) {
        for (int64_t qi = q0; qi < q1; ++qi) {
          const int64_t q = forward ? qi : q0 + q1 - 1 - qi;
          const int64_t j0 = q * U;
          const __mmask16 mask = static_cast<__mmask16>(H - j0 >= U ? 0xFFFF : (1u << (H - j0)) - 1);
          for (int64_t r0 = 0; r0 < B; r0 += kMaxRows)
            f(q, j0, mask, r0, static_cast<int>(std::min<int64_t>(kMaxRows, B - r0)));
        }
        forward = !forward;
      };
      int cur = 0;
      for (int64_t step = 0; step < steps; ++step) {
        float* h = hbuf + cur * B * Hp;
        float* hn = hbuf + (1 - cur) * B * Hp;
        auto y_at = [&](int64_t t, int64_t row, int64_t j0) { return y ? y->data<float>() + y_row(t, d, row) + j0 : nullptr; };
        // First (or only) product: every gate, or z and r for the reset-before-product GRU.
        const int64_t gn = gru ? 2 : G;
        if (int8) quantize_state(h);
        each_block([&](int64_t q, int64_t j0, __mmask16 mask, int64_t r0, int nb) {
          product(q, 0, gn, h, r0, nb);
          for (int k = 0; k < nb; ++k) {
            int64_t row = r0 + k;
            float* hrow = h + row * Hp + j0;
            float* hnrow = hn + row * Hp + j0;
            if (step >= len(row)) {  // this row has ended: its state stays
              std::copy_n(hrow, U, hnrow);
              continue;
            }
            int64_t t = rev ? len(row) - 1 - step : step;
            UnitBlock u{pre_row(t, row) + j0, acc + k * gn * U, H, mask, peep ? peep + j0 : nullptr, rbh + j0,
                        cbuf + row * Hp + j0, hrow, hnrow, y_at(t, row, j0), sp.has_clip, sp.clip};
            if (lstm) lstm_units(u);
            else if (lbr) lbr_gru_units(u);
            else if (gru) gru_first(u, zbuf + row * Hp + j0, rh + row * Hp + j0);
            else rnn_units(u, sp.act);
          }
        });
        if (gru) {
          // h~ needs r * h of every unit: the second product once all threads have them.
          barrier.wait();
          if (int8) quantize_state(rh);
          each_block([&](int64_t q, int64_t j0, __mmask16 mask, int64_t r0, int nb) {
            product(q, 2, 1, rh, r0, nb);
            for (int k = 0; k < nb; ++k) {
              int64_t row = r0 + k;
              if (step >= len(row)) continue;
              int64_t t = rev ? len(row) - 1 - step : step;
              UnitBlock u{pre_row(t, row) + j0, acc + k * U, H, mask, nullptr, nullptr, nullptr, h + row * Hp + j0,
                          hn + row * Hp + j0, y_at(t, row, j0), sp.has_clip, sp.clip};
              gru_second(u, zbuf + row * Hp + j0);
            }
          });
        }
        barrier.wait();
        cur = 1 - cur;
      }
      return cur;
    };
    int final_buf = 0;
    if (T == 1) {
      SpinBarrier one(1);
      final_buf = work(0, 1, one);
    } else {
      std::unique_ptr<SpinBarrier> barrier;
#pragma omp parallel num_threads(T)
      {
        // The team may be smaller than asked (nested in another parallel region): the barrier
        // counts the threads there are.
#pragma omp single
        barrier = std::make_unique<SpinBarrier>(omp_get_num_threads());
        int f = work(omp_get_thread_num(), omp_get_num_threads(), *barrier);
        if (omp_get_thread_num() == 0) final_buf = f;
      }
    }
    const float* hf = hbuf + final_buf * B * Hp;
    for (int64_t row = 0; row < B; ++row) {
      if (yh) std::copy_n(hf + row * Hp, H, yh->data<float>() + st(d, row));
      if (yc) std::copy_n(cbuf + row * Hp, H, yc->data<float>() + st(d, row));
    }
  }
  ++runs;
  if (int8) ++int8_runs;
}

uint64_t rnn_fast_runs() { return runs.load(); }
uint64_t rnn_int8_runs() { return int8_runs.load(); }
bool rnn_int8_supported() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vnni");
  return ok;
}

}  // namespace t2o::kern
