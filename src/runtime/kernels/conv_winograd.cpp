#include "runtime/kernels/conv_winograd.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/util.h"

namespace t2o::kern {

namespace {

constexpr int64_t kB = 16;  // channel block (nChw16c)
std::atomic<uint64_t> g_runs{0};

T2O_AVX512_WARNINGS_OFF

// One 4x4 input tile of one channel block (16 lanes), rows from y0 and columns from x0 (zeros
// outside the image), transformed into V[k][0..15] for k = 4i + j: V = B^T d B with
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
T2O_AVX512 void input_tile(const float* xc, int64_t H, int64_t W, int64_t y0, int64_t x0, float* v, int64_t kstride) {
  __m512 d[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t yy = y0 + i, xx = x0 + j;
      d[i][j] = yy >= 0 && yy < H && xx >= 0 && xx < W ? _mm512_loadu_ps(xc + (yy * W + xx) * kB) : _mm512_setzero_ps();
    }
  for (int j = 0; j < 4; ++j) {
    __m512 t0 = _mm512_sub_ps(d[0][j], d[2][j]), t1 = _mm512_add_ps(d[1][j], d[2][j]);
    __m512 t2 = _mm512_sub_ps(d[2][j], d[1][j]), t3 = _mm512_sub_ps(d[1][j], d[3][j]);
    d[0][j] = t0, d[1][j] = t1, d[2][j] = t2, d[3][j] = t3;
  }
  for (int i = 0; i < 4; ++i) {
    float* row = v + (4 * i) * kstride;
    _mm512_storeu_ps(row, _mm512_sub_ps(d[i][0], d[i][2]));
    _mm512_storeu_ps(row + kstride, _mm512_add_ps(d[i][1], d[i][2]));
    _mm512_storeu_ps(row + 2 * kstride, _mm512_sub_ps(d[i][2], d[i][1]));
    _mm512_storeu_ps(row + 3 * kstride, _mm512_sub_ps(d[i][1], d[i][3]));
  }
}

// bias + post-ops over one output vector; `r` is the residual at the same place (Sum only).
T2O_AVX512 inline __m512 finish(__m512 v, __m512 bias, const std::vector<ConvPostOp>& post, const float* r) {
  v = _mm512_add_ps(v, bias);
  for (const ConvPostOp& p : post) {
    switch (p.kind) {
      case ConvPostOp::Kind::Relu:
        if (p.alpha == 0.0f) {
          v = _mm512_max_ps(v, _mm512_setzero_ps());
        } else {
          __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
          v = _mm512_mask_mul_ps(v, neg, v, _mm512_set1_ps(p.alpha));
        }
        break;
      case ConvPostOp::Kind::Clip:
        v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(p.alpha)), _mm512_set1_ps(p.beta));
        break;
      case ConvPostOp::Kind::Sum: v = _mm512_add_ps(v, _mm512_loadu_ps(r)); break;
      default: break;  // make() admits no others
    }
  }
  return v;
}

// One tile's 16 products of one output block back to its 2x2 outputs: A^T m A with
// A^T = [1 1 1 0; 0 1 -1 -1]; stored where they fall inside the OH x OW map, lanes past M zero.
T2O_AVX512 void output_tile(const float* m, int64_t kstride, float* yc, const float* rc, int64_t OH, int64_t OW,
                            int64_t oy, int64_t ox, const float* bias16, const std::vector<ConvPostOp>& post, __mmask16 lanes) {
  const __m512 bias = _mm512_loadu_ps(bias16);
  __m512 s[2][4];
  for (int j = 0; j < 4; ++j) {
    __m512 m0 = _mm512_loadu_ps(m + j * kstride), m1 = _mm512_loadu_ps(m + (4 + j) * kstride);
    __m512 m2 = _mm512_loadu_ps(m + (8 + j) * kstride), m3 = _mm512_loadu_ps(m + (12 + j) * kstride);
    s[0][j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
    s[1][j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
  }
  for (int i = 0; i < 2; ++i) {
    const int64_t yy = oy + i;
    if (yy >= OH) break;
    __m512 o[2] = {_mm512_add_ps(_mm512_add_ps(s[i][0], s[i][1]), s[i][2]),
                   _mm512_sub_ps(_mm512_sub_ps(s[i][1], s[i][2]), s[i][3])};
    for (int j = 0; j < 2; ++j) {
      const int64_t xx = ox + j;
      if (xx >= OW) break;
      const int64_t at = (yy * OW + xx) * kB;
      __m512 v = finish(o[j], bias, post, rc ? rc + at : nullptr);
      _mm512_storeu_ps(yc + at, _mm512_maskz_mov_ps(lanes, v));
    }
  }
}

T2O_AVX512_WARNINGS_ON

}  // namespace

using dnnl::memory;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

struct WinogradConv::Impl {
  int64_t C = 0, M = 0, Cp = 0, Mp = 0;
  std::vector<float> bias;  // Mp values, zeros past M
  std::vector<ConvPostOp> post;
  // The 16 transformed weights [Cp, Mp], in the layout oneDNN's matmul wants (one packing per
  // layout; the plain copies are not kept), and a matmul per row count.
  std::vector<std::pair<memory::desc, std::vector<memory>>> packed;
  struct Prim {
    dnnl::matmul mm;
    size_t layout;  // index in packed
    memory::desc scratchpad;
  };
  std::map<int64_t, Prim> prims;  // by row count
  std::mutex mu;                                              // one run at a time (buffers, caches)
  Tensor v, m;  // transformed tiles, products (64-byte aligned: the matmuls' rows start on lines)
  std::vector<uint8_t> scratch;

  // The primitive for `rows` rows and the weights in its layout (the caller holds mu).
  Prim& prim(int64_t rows) {
    auto it = prims.find(rows);
    if (it != prims.end()) return it->second;
    if (prims.size() >= 16) prims.clear();
    memory::desc a({rows, Cp}, memory::data_type::f32, memory::format_tag::ab);
    memory::desc c({rows, Mp}, memory::data_type::f32, memory::format_tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // The weights' layout as packed first, when oneDNN takes it for this row count: another
    // layout would hold a second copy of the transformed weights (16/9 of the weights).
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, packed.front().first, c), attr, engine());
    } catch (const dnnl::error&) {
      memory::desc b({Cp, Mp}, memory::data_type::f32, memory::format_tag::any);
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, engine());
    }
    if (pd.scratchpad_desc().get_size() + 64 > scratch.size()) scratch.resize(pd.scratchpad_desc().get_size() + 64);
    size_t at = packed.size();
    for (size_t i = 0; i < packed.size(); ++i)
      if (packed[i].first == pd.weights_desc()) at = i;
    if (at == packed.size()) {
      // Another layout: reordered from the first one (exact), or it is the first.
      std::vector<memory> ws;
      dnnl::stream st(engine());
      for (memory& from : packed.front().second) {
        memory to(pd.weights_desc(), engine());
        dnnl::reorder(from, to).execute(st, from, to);
        ws.push_back(to);
      }
      st.wait();
      packed.emplace_back(pd.weights_desc(), std::move(ws));
    }
    return prims.emplace(rows, Prim{dnnl::matmul(pd), at, pd.scratchpad_desc()}).first->second;
  }
};

WinogradConv::WinogradConv() : impl_(std::make_unique<Impl>()) {}
WinogradConv::~WinogradConv() = default;

bool WinogradConv::qualifies(const Tensor& w, const Tensor* bias, const std::vector<ConvPostOp>& post) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 || w.dtype() != DType::Float || w.rank() != 4 || w.dim(2) != 3 || w.dim(3) != 3 || w.dim(0) < 32 ||
      w.dim(1) < 32)
    return false;
  if (bias && (bias->dtype() != DType::Float || bias->numel() != w.dim(0))) return false;
  int sums = 0;
  for (const ConvPostOp& p : post) {
    if (p.kind != ConvPostOp::Kind::Relu && p.kind != ConvPostOp::Kind::Clip && p.kind != ConvPostOp::Kind::Sum)
      return false;
    sums += p.kind == ConvPostOp::Kind::Sum;
  }
  return sums <= 1;
}

std::unique_ptr<WinogradConv> WinogradConv::make(const Tensor& w, const Tensor* bias,
                                                 const std::vector<ConvPostOp>& post) {
  if (!qualifies(w, bias, post)) return nullptr;
  std::unique_ptr<WinogradConv> c(new WinogradConv());
  Impl& s = *c->impl_;
  s.M = w.dim(0);
  s.C = w.dim(1);
  s.Cp = (s.C + kB - 1) / kB * kB;
  s.Mp = (s.M + kB - 1) / kB * kB;
  s.bias.assign(static_cast<size_t>(s.Mp), 0.0f);
  if (bias) std::copy_n(bias->data<float>(), s.M, s.bias.begin());
  s.post = post;
  // U = G g G^T per (m, c), G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]; U[k] is [Cp, Mp].
  // Made and packed one k at a time, through one [Cp, Mp] buffer: the plain transform never
  // exists whole next to the packed one (peak memory).
  // Packed for a typical row count; other layouts are reordered from this one when needed.
  try {
    memory::desc a({64, s.Cp}, memory::data_type::f32, memory::format_tag::ab);
    memory::desc b({s.Cp, s.Mp}, memory::data_type::f32, memory::format_tag::any);
    memory::desc o({64, s.Mp}, memory::data_type::f32, memory::format_tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, o), engine());
    std::vector<memory> ws;
    dnnl::stream st(engine());
    Tensor t(DType::Float, Dims{s.Cp, s.Mp});  // zeros: the padded channels stay 0
    float* u = t.data<float>();
    const float* wp = w.data<float>();
    for (int k = 0; k < 16; ++k) {
      const int i = k / 4, j = k % 4;
      for (int64_t mo = 0; mo < s.M; ++mo)
        for (int64_t ci = 0; ci < s.C; ++ci) {
          const float* g = wp + (mo * s.C + ci) * 9;
          float gi[3];  // row i of G g
          for (int q = 0; q < 3; ++q) {
            const float a0 = g[q], a1 = g[3 + q], a2 = g[6 + q];
            gi[q] = i == 0 ? a0 : i == 1 ? 0.5f * (a0 + a1 + a2) : i == 2 ? 0.5f * (a0 - a1 + a2) : a2;
          }
          u[ci * s.Mp + mo] = j == 0 ? gi[0] : j == 1 ? 0.5f * (gi[0] + gi[1] + gi[2]) : j == 2 ? 0.5f * (gi[0] - gi[1] + gi[2]) : gi[2];
        }
      memory from({{s.Cp, s.Mp}, memory::data_type::f32, memory::format_tag::ab}, engine(), t.raw());
      memory to(pd.weights_desc(), engine());
      dnnl::reorder(from, to).execute(st, from, to);
      st.wait();
      ws.push_back(to);
    }
    s.packed.emplace_back(pd.weights_desc(), std::move(ws));
  } catch (const dnnl::error&) {
    return nullptr;
  }
  return c;
}

bool WinogradConv::takes(const Dims& stride, const Dims& dilation, const Dims& pads, int64_t OH, int64_t OW) {
  if (stride != Dims{1, 1} || dilation != Dims{1, 1} || pads.size() != 4) return false;
  for (int64_t p : pads)
    if (p != 0 && p != 1) return false;
  // 16 tiles: a 7 x 7 map (ResNet-18's last 3x3 convs: 1.8 -> 1.2 ms each at 1 thread on a
  // 2-FMA AVX-512 core). Smaller maps leave the products too few rows.
  return OH > 0 && OW > 0 && ((OH + 1) / 2) * ((OW + 1) / 2) >= 16;
}

bool WinogradConv::run(const float* x, int64_t N, int64_t H, int64_t W, const Dims& pads, float* y, int64_t OH,
                       int64_t OW, const float* r, int threads) {
  Impl& s = *impl_;
  const int64_t pt = pads[0], pl = pads[1];
  if (N <= 0 || OH <= 0 || OW <= 0 || OH != H + pt + pads[2] - 2 || OW != W + pl + pads[3] - 2) return false;
  const int64_t TH = (OH + 1) / 2, TW = (OW + 1) / 2, T = N * TH * TW;
  const int64_t Cb = s.Cp / kB, Mb = s.Mp / kB;
  // Tiles per chunk: about 2 MB of transformed tiles and products per thread, in chunks of equal
  // size. With several threads each takes whole chunks (transform, 16 products, transform back)
  // with no barrier in between; the products then run on their thread alone, which scales better
  // than splitting every product's few rows between the threads.
  const int64_t most = std::max<int64_t>(32, (int64_t{2} << 20) / (64 * (s.Cp + s.Mp)));
  const int team = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, (T + 15) / 16)));
  // Fewer than 32 tiles per thread (7 x 7 and 14 x 14 maps at batch 1): one chunk, its transforms
  // split by tiles and its 16 products by product, with a barrier between the phases (at 2
  // threads ResNet-18 9.6 -> 8.8 ms; a 7 x 7 map had run on one thread).
  if (threads > 1 && T < 32 * threads && T <= most) return run_split(x, N, H, W, pads, y, OH, OW, r, threads);
  int64_t chunks = (T + most - 1) / most;
  chunks = (chunks + team - 1) / team * team;
  const int64_t chunk = (T + chunks - 1) / chunks;
  chunks = (T + chunk - 1) / chunk;
  std::lock_guard<std::mutex> lock(s.mu);
  const int64_t vsize = 16 * chunk * s.Cp, msize = 16 * chunk * s.Mp;
  if (s.v.numel() < team * vsize) s.v = Tensor::uninitialized(DType::Float, {team * vsize});
  if (s.m.numel() < team * msize) s.m = Tensor::uninitialized(DType::Float, {team * msize});
  const __mmask16 tail = static_cast<__mmask16>(s.M % kB ? (1u << (s.M % kB)) - 1 : 0xFFFF);
  Impl::Prim *full = nullptr, *last = nullptr;
  try {
    full = &s.prim(chunk);
    last = &s.prim(T - (chunks - 1) * chunk);
  } catch (const dnnl::error&) {
    return false;
  }
  const size_t per = (std::max(full->scratchpad.get_size(), last->scratchpad.get_size()) + 127) / 64 * 64;
  if (s.scratch.size() < per * static_cast<size_t>(team)) s.scratch.resize(per * static_cast<size_t>(team));
  // One chunk on one thread.
  auto one_chunk = [&](int tid, int64_t c, dnnl::stream& st) {
    const int64_t t0 = c * chunk, rows = std::min(chunk, T - t0);
    float* v = s.v.data<float>() + tid * vsize;
    float* m = s.m.data<float>() + tid * msize;
    for (int64_t it = 0; it < rows * Cb; ++it) {
      const int64_t tl = it / Cb, cb = it % Cb, t = t0 + tl;
      const int64_t n = t / (TH * TW), ty = t / TW % TH, tx = t % TW;
      input_tile(x + (n * Cb + cb) * H * W * kB, H, W, 2 * ty - pt, 2 * tx - pl, v + tl * s.Cp + cb * kB, rows * s.Cp);
    }
    Impl::Prim& p = rows == chunk ? *full : *last;
    memory::desc a({rows, s.Cp}, memory::data_type::f32, memory::format_tag::ab);
    memory::desc o({rows, s.Mp}, memory::data_type::f32, memory::format_tag::ab);
    void* sp = s.scratch.data() + per * static_cast<size_t>(tid);
    size_t space = per;
    memory scratch(p.scratchpad, engine(), std::align(64, p.scratchpad.get_size(), sp, space));
    for (int64_t k = 0; k < 16; ++k)
      p.mm.execute(st, {{DNNL_ARG_SRC, memory(a, engine(), v + k * rows * s.Cp)},
                        {DNNL_ARG_WEIGHTS, s.packed[p.layout].second[static_cast<size_t>(k)]},
                        {DNNL_ARG_DST, memory(o, engine(), m + k * rows * s.Mp)},
                        {DNNL_ARG_SCRATCHPAD, scratch}});
    st.wait();
    for (int64_t it = 0; it < rows * Mb; ++it) {
      const int64_t tl = it / Mb, mb = it % Mb, t = t0 + tl;
      const int64_t n = t / (TH * TW), ty = t / TW % TH, tx = t % TW;
      const int64_t plane = (n * Mb + mb) * OH * OW * kB;
      output_tile(m + tl * s.Mp + mb * kB, rows * s.Mp, y + plane, r ? r + plane : nullptr, OH, OW, 2 * ty, 2 * tx,
                  s.bias.data() + mb * kB, s.post, mb == Mb - 1 ? tail : 0xFFFF);
    }
  };
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(team)
  {
    const int tid = omp_get_thread_num();
    try {
      dnnl::stream st(engine());
      for (int64_t c = tid; c < chunks; c += team) one_chunk(tid, c, st);
    } catch (...) {
      failed = true;
    }
  }
  if (failed) return false;
  ++g_runs;
  return true;
}

bool WinogradConv::run_split(const float* x, int64_t N, int64_t H, int64_t W, const Dims& pads, float* y, int64_t OH,
                             int64_t OW, const float* r, int threads) {
  Impl& s = *impl_;
  const int64_t pt = pads[0], pl = pads[1];
  const int64_t TH = (OH + 1) / 2, TW = (OW + 1) / 2, T = N * TH * TW;
  const int64_t Cb = s.Cp / kB, Mb = s.Mp / kB;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.v.numel() < 16 * T * s.Cp) s.v = Tensor::uninitialized(DType::Float, {16 * T * s.Cp});
  if (s.m.numel() < 16 * T * s.Mp) s.m = Tensor::uninitialized(DType::Float, {16 * T * s.Mp});
  const __mmask16 tail = static_cast<__mmask16>(s.M % kB ? (1u << (s.M % kB)) - 1 : 0xFFFF);
  Impl::Prim* p = nullptr;
  try {
    p = &s.prim(T);
  } catch (const dnnl::error&) {
    return false;
  }
  const size_t per = (p->scratchpad.get_size() + 127) / 64 * 64;
  if (s.scratch.size() < per * static_cast<size_t>(threads)) s.scratch.resize(per * static_cast<size_t>(threads));
  float* v = s.v.data<float>();
  float* m = s.m.data<float>();
  memory::desc a({T, s.Cp}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc o({T, s.Mp}, memory::data_type::f32, memory::format_tag::ab);
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(threads)
  {
    const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
    const int64_t in_n = T * Cb, out_n = T * Mb;
    for (int64_t it = in_n * tid / nth; it < in_n * (tid + 1) / nth; ++it) {
      const int64_t t = it / Cb, cb = it % Cb;
      const int64_t n = t / (TH * TW), ty = t / TW % TH, tx = t % TW;
      input_tile(x + (n * Cb + cb) * H * W * kB, H, W, 2 * ty - pt, 2 * tx - pl, v + t * s.Cp + cb * kB, T * s.Cp);
    }
#pragma omp barrier
    try {
      dnnl::stream st(engine());
      void* sp = s.scratch.data() + per * static_cast<size_t>(tid);
      size_t space = per;
      memory scratch(p->scratchpad, engine(), std::align(64, p->scratchpad.get_size(), sp, space));
      for (int64_t k = tid; k < 16; k += nth)
        p->mm.execute(st, {{DNNL_ARG_SRC, memory(a, engine(), v + k * T * s.Cp)},
                           {DNNL_ARG_WEIGHTS, s.packed[p->layout].second[static_cast<size_t>(k)]},
                           {DNNL_ARG_DST, memory(o, engine(), m + k * T * s.Mp)},
                           {DNNL_ARG_SCRATCHPAD, scratch}});
      st.wait();
    } catch (...) {
      failed = true;
    }
#pragma omp barrier
    if (!failed) {
      for (int64_t it = out_n * tid / nth; it < out_n * (tid + 1) / nth; ++it) {
        const int64_t t = it / Mb, mb = it % Mb;
        const int64_t n = t / (TH * TW), ty = t / TW % TH, tx = t % TW;
        const int64_t plane = (n * Mb + mb) * OH * OW * kB;
        output_tile(m + t * s.Mp + mb * kB, T * s.Mp, y + plane, r ? r + plane : nullptr, OH, OW, 2 * ty, 2 * tx,
                    s.bias.data() + mb * kB, s.post, mb == Mb - 1 ? tail : 0xFFFF);
      }
    }
  }
  if (failed) return false;
  ++g_runs;
  return true;
}

uint64_t WinogradConv::runs_so_far() { return g_runs.load(); }

}  // namespace t2o::kern
