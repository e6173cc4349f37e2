#include "runtime/kernels/conv_winograd.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/task_pool.h"
#include "runtime/kernels/util.h"

namespace t2o::kern {

namespace {

constexpr int64_t kB = 16;  // channel block (nChw16c)
std::atomic<uint64_t> g_runs{0}, g_runs4{0};  // all, F(4x4, 3x3)

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

// F(4x4, 3x3) on the interpolation points 0, -1, 1, 1/2, -2 and infinity (their rounding error
// is 2-4x below that of the usual 0, 1, -1, 2, -2 in float: mean 1.4e-6 against 2.3e-6, worst
// 5.9e-5 against 2.3e-4 over 64 channels of values in [-1, 1]).
// One 6x6 input tile (rows from y0, columns from x0, zeros outside) into V[k][0..15], k = 6i + j:
// V = B^T d B with B^T = [1 -3/2 -2 3/2 1 0; 0 1 -5/2 1/2 1 0; 0 -1 1/2 5/2 1 0;
// 0 -2 -1 2 1 0; 0 1/2 -1 -1/2 1 0; 0 1 -3/2 -2 3/2 1].
T2O_AVX512 inline __m512 fma_c(float c, __m512 x, __m512 acc) {
  return _mm512_fmadd_ps(_mm512_set1_ps(c), x, acc);
}
T2O_AVX512 inline void bt6(const __m512* d, __m512* t) {
  t[0] = fma_c(1.5f, d[3], fma_c(-2.0f, d[2], fma_c(-1.5f, d[1], _mm512_add_ps(d[0], d[4]))));
  t[1] = fma_c(0.5f, d[3], fma_c(-2.5f, d[2], _mm512_add_ps(d[1], d[4])));
  t[2] = fma_c(2.5f, d[3], fma_c(0.5f, d[2], _mm512_sub_ps(d[4], d[1])));
  t[3] = fma_c(2.0f, d[3], fma_c(-2.0f, d[1], _mm512_sub_ps(d[4], d[2])));
  t[4] = fma_c(-0.5f, d[3], fma_c(0.5f, d[1], _mm512_sub_ps(d[4], d[2])));
  t[5] = fma_c(1.5f, d[4], fma_c(-2.0f, d[3], fma_c(-1.5f, d[2], _mm512_add_ps(d[1], d[5]))));
}
T2O_AVX512 void input_tile6(const float* xc, int64_t H, int64_t W, int64_t y0, int64_t x0, float* v, int64_t kstride) {
  __m512 c[6][6];  // c[j][i]: column j after B^T over its rows
  const bool inside = y0 >= 0 && y0 + 6 <= H && x0 >= 0 && x0 + 6 <= W;
  for (int j = 0; j < 6; ++j) {
    __m512 d[6];
    const int64_t xx = x0 + j;
    for (int i = 0; i < 6; ++i) {
      const int64_t yy = y0 + i;
      d[i] = inside || (yy >= 0 && yy < H && xx >= 0 && xx < W) ? _mm512_loadu_ps(xc + (yy * W + xx) * kB)
                                                                 : _mm512_setzero_ps();
    }
    bt6(d, c[j]);
  }
  for (int i = 0; i < 6; ++i) {
    __m512 r[6], t[6];
    for (int j = 0; j < 6; ++j) r[j] = c[j][i];
    bt6(r, t);
    for (int j = 0; j < 6; ++j) _mm512_storeu_ps(v + (6 * i + j) * kstride, t[j]);
  }
}

// bias + post-ops over one output vector; `r` is the residual at the same place (Sum only).
T2O_AVX512 inline __m512 finish(__m512 v, __m512 bias, const std::vector<ConvPostOp>& post, const float* r) {
  v = _mm512_add_ps(v, bias);
  for (const ConvPostOp& p : post) {
    switch (p.kind) {
      case ConvPostOp::Kind::Relu:
        if (p.alpha == 0.0f) {
          v = relu512(v);
        } else {
          __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
          v = _mm512_mask_mul_ps(v, neg, v, _mm512_set1_ps(p.alpha));
        }
        break;
      case ConvPostOp::Kind::Clip:
        v = clamp512(v, _mm512_set1_ps(p.alpha), _mm512_set1_ps(p.beta));
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

// F(4x4, 3x3): one tile's 36 products of one output block back to its 4x4 outputs, A^T m A with
// A^T = [1 1 1 1 1 0; 0 -1 1 1/2 -2 0; 0 1 1 1/4 4 0; 0 -1 1 1/8 -8 1].
T2O_AVX512 inline void at6(const __m512* m, __m512* o) {
  const __m512 sum12 = _mm512_add_ps(m[1], m[2]), dif21 = _mm512_sub_ps(m[2], m[1]);
  o[0] = _mm512_add_ps(_mm512_add_ps(m[0], sum12), _mm512_add_ps(m[3], m[4]));
  o[1] = fma_c(-2.0f, m[4], fma_c(0.5f, m[3], dif21));
  o[2] = fma_c(4.0f, m[4], fma_c(0.25f, m[3], sum12));
  o[3] = fma_c(-8.0f, m[4], fma_c(0.125f, m[3], _mm512_add_ps(dif21, m[5])));
}
T2O_AVX512 void output_tile6(const float* m, int64_t kstride, float* yc, const float* rc, int64_t OH, int64_t OW,
                             int64_t oy, int64_t ox, const float* bias16, const std::vector<ConvPostOp>& post,
                             __mmask16 lanes) {
  const __m512 bias = _mm512_loadu_ps(bias16);
  __m512 s[4][6];  // s[i][j]: A^T over column j, row i
  for (int j = 0; j < 6; ++j) {
    __m512 col[6], o[4];
    for (int i = 0; i < 6; ++i) col[i] = _mm512_loadu_ps(m + (6 * i + j) * kstride);
    at6(col, o);
    for (int i = 0; i < 4; ++i) s[i][j] = o[i];
  }
  for (int i = 0; i < 4; ++i) {
    const int64_t yy = oy + i;
    if (yy >= OH) break;
    __m512 o[4];
    at6(s[i], o);
    for (int j = 0; j < 4; ++j) {
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
  int tile = 2;  // outputs per tile side: F(2x2, 3x3) or F(4x4, 3x3)
  int64_t A() const { return tile + 2; }  // inputs per tile side
  int64_t K() const { return A() * A(); }  // products
  // One tile of one channel block in, one tile of one output block out (see input_tile).
  void in_tile(const float* xc, int64_t H, int64_t W, int64_t y0, int64_t x0, float* v, int64_t kstride) const {
    if (tile == 4) input_tile6(xc, H, W, y0, x0, v, kstride);
    else input_tile(xc, H, W, y0, x0, v, kstride);
  }
  void out_tile(const float* m, int64_t kstride, float* yc, const float* rc, int64_t OH, int64_t OW, int64_t oy,
                int64_t ox, const float* bias16, __mmask16 lanes) const {
    if (tile == 4) output_tile6(m, kstride, yc, rc, OH, OW, oy, ox, bias16, post, lanes);
    else output_tile(m, kstride, yc, rc, OH, OW, oy, ox, bias16, post, lanes);
  }
  std::vector<float> bias;  // Mp values, zeros past M
  std::vector<ConvPostOp> post;
  // The K products as one batched matmul (one call per chunk: the calls' overhead and a thread
  // split per product cost more than the products on small channel counts), or as K matmuls
  // (fewer than 32 tiles: on few rows of many channels oneDNN's batched kernel is slower).
  bool batched = false;
  // The transformed weights in the layout oneDNN's matmul wants (one packing per layout; the plain
  // copies are not kept): one [K, Cp, Mp] memory when batched, else K [Cp, Mp] ones.
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

  // A chunk's transformed tiles (Cp columns) or products (Mp columns): K matrices of `rows` rows
  // one after the other, as one batch or as one of them.
  memory::desc act_desc(int64_t rows, int64_t cols) const {
    if (batched) return memory::desc({K(), rows, cols}, memory::data_type::f32, memory::format_tag::abc);
    return memory::desc({rows, cols}, memory::data_type::f32, memory::format_tag::ab);
  }
  memory::desc weights_any() const {
    if (batched) return memory::desc({K(), Cp, Mp}, memory::data_type::f32, memory::format_tag::any);
    return memory::desc({Cp, Mp}, memory::data_type::f32, memory::format_tag::any);
  }
  // The products of a chunk of `rows` tiles: v holds its transformed tiles, m gets the products.
  // Products first, first + step, ... (a thread's share), or when batched all K in one call.
  void products(const Prim& p, int64_t rows, float* v, float* m, const memory& scratch, dnnl::stream& st,
                int64_t first = 0, int64_t step = 1) const {
    const memory::desc a = act_desc(rows, Cp), o = act_desc(rows, Mp);
    const std::vector<memory>& w = packed[p.layout].second;
    for (int64_t k = first; k < (batched ? 1 : K()); k += step)
      p.mm.execute(st, {{DNNL_ARG_SRC, memory(a, engine(), v + k * rows * Cp)},
                        {DNNL_ARG_WEIGHTS, w[static_cast<size_t>(k)]},
                        {DNNL_ARG_DST, memory(o, engine(), m + k * rows * Mp)},
                        {DNNL_ARG_SCRATCHPAD, scratch}});
    st.wait();
  }

  // The primitive for `rows` rows and the weights in its layout (the caller holds mu).
  Prim& prim(int64_t rows) {
    auto it = prims.find(rows);
    if (it != prims.end()) return it->second;
    if (prims.size() >= 16) prims.clear();
    memory::desc a = act_desc(rows, Cp), c = act_desc(rows, Mp);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // The weights' layout as packed first, when oneDNN takes it for this row count: another
    // layout would hold a second copy of the transformed weights (16/9 of the weights).
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, packed.front().first, c), attr, engine());
    } catch (const dnnl::error&) {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, weights_any(), c), attr, engine());
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
                                                 const std::vector<ConvPostOp>& post, int tile, int64_t tiles) {
  if (!qualifies(w, bias, post) || (tile != 2 && tile != 4)) return nullptr;
  std::unique_ptr<WinogradConv> c(new WinogradConv());
  Impl& s = *c->impl_;
  s.tile = tile;
  // Batched unless the products have few rows (16 rows of 512 channels: 0.77 -> 1.26 ms batched at
  // 1 thread); on 64 - 256 channels and 49 or more rows the batched call is 3 - 18% faster at 1
  // thread and 1.3 - 4x at 2.
  s.batched = tiles >= 32;
  s.M = w.dim(0);
  s.C = w.dim(1);
  s.Cp = (s.C + kB - 1) / kB * kB;
  s.Mp = (s.M + kB - 1) / kB * kB;
  s.bias.assign(static_cast<size_t>(s.Mp), 0.0f);
  if (bias) std::copy_n(bias->data<float>(), s.M, s.bias.begin());
  s.post = post;
  // U = G g G^T per (m, c), computed in double; U[k] is [Cp, Mp]. F(2x2, 3x3):
  // G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]; F(4x4, 3x3) (points as in input_tile6):
  // G = [1 0 0; -1/3 1/3 -1/3; 1/3 1/3 1/3; -16/15 -8/15 -4/15; 1/15 -2/15 4/15; 0 0 1].
  // Made and packed one k at a time, through one [Cp, Mp] buffer: the plain transform never
  // exists whole next to the packed one (peak memory).
  // Packed for a typical row count; other layouts are reordered from this one when needed.
  static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static const double G4[6][3] = {{1, 0, 0},
                                  {-1.0 / 3, 1.0 / 3, -1.0 / 3},
                                  {1.0 / 3, 1.0 / 3, 1.0 / 3},
                                  {-16.0 / 15, -8.0 / 15, -4.0 / 15},
                                  {1.0 / 15, -2.0 / 15, 4.0 / 15},
                                  {0, 0, 1}};
  const double(*G)[3] = tile == 4 ? G4 : G2;
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(s.act_desc(64, s.Cp), s.weights_any(), s.act_desc(64, s.Mp)),
                                    engine());
    std::vector<memory> ws;
    if (s.batched) ws.emplace_back(pd.weights_desc(), engine());
    dnnl::stream st(engine());
    Tensor t(DType::Float, Dims{s.Cp, s.Mp});  // zeros: the padded channels stay 0
    float* u = t.data<float>();
    const float* wp = w.data<float>();
    for (int64_t k = 0; k < s.K(); ++k) {
      const double* gi = G[k / s.A()];
      const double* gj = G[k % s.A()];
      for (int64_t mo = 0; mo < s.M; ++mo)
        for (int64_t ci = 0; ci < s.C; ++ci) {
          const float* g = wp + (mo * s.C + ci) * 9;
          double acc = 0;
          for (int p = 0; p < 3; ++p)
            for (int q = 0; q < 3; ++q) acc += gi[p] * g[3 * p + q] * gj[q];
          u[ci * s.Mp + mo] = static_cast<float>(acc);
        }
      if (s.batched) {  // into product k's part of the batch
        memory from({{1, s.Cp, s.Mp}, memory::data_type::f32, memory::format_tag::abc}, engine(), t.raw());
        memory to(pd.weights_desc().submemory_desc({1, s.Cp, s.Mp}, {k, 0, 0}), engine(), ws[0].get_data_handle());
        dnnl::reorder(from, to).execute(st, from, to);
      } else {
        memory from({{s.Cp, s.Mp}, memory::data_type::f32, memory::format_tag::ab}, engine(), t.raw());
        memory to(pd.weights_desc(), engine());
        dnnl::reorder(from, to).execute(st, from, to);
        ws.push_back(to);
      }
      st.wait();
    }
    s.packed.emplace_back(pd.weights_desc(), std::move(ws));
  } catch (const dnnl::error&) {
    return nullptr;
  }
  return c;
}

int WinogradConv::takes(const Dims& stride, const Dims& dilation, const Dims& pads, int64_t OH, int64_t OW) {
  if (stride != Dims{1, 1} || dilation != Dims{1, 1} || pads.size() != 4) return 0;
  for (int64_t p : pads)
    if (p != 0 && p != 1) return 0;
  if (OH <= 0 || OW <= 0) return 0;
  // F(4x4, 3x3) from 36 tiles (21 x 21 outputs); on 14 x 14 (16 tiles) it lost to F(2x2, 3x3) in
  // ResNet-50 at 1 thread (0.78 -> 1.04 ms per conv; its weights are 2.25x larger).
  if (((OH + 3) / 4) * ((OW + 3) / 4) >= 36) return 4;
  // More than 16 tiles (9 x 9 outputs and up). On 7 x 7 maps (ResNet's last 3x3 convs) the
  // channels-last brgemm direct conv (conv_dnnl.cpp) is as fast at batch 1 (ResNet-18's three:
  // 4.7 -> 4.9 ms per run at 1 thread, 2.7 -> 2.7 at 2) without the 16/9 larger transformed
  // weights (ResNet-18's peak RSS 166 -> 142 MB at 2 threads); smaller maps leave the products
  // too few rows.
  return ((OH + 1) / 2) * ((OW + 1) / 2) > 16 ? 2 : 0;
}

bool WinogradConv::run(const float* x, int64_t N, int64_t H, int64_t W, const Dims& pads, float* y, int64_t OH,
                       int64_t OW, const float* r, int threads) {
  Impl& s = *impl_;
  const int64_t pt = pads[0], pl = pads[1];
  if (N <= 0 || OH <= 0 || OW <= 0 || OH != H + pt + pads[2] - 2 || OW != W + pl + pads[3] - 2) return false;
  const int64_t e = s.tile, K = s.K();
  const int64_t TH = (OH + e - 1) / e, TW = (OW + e - 1) / e, T = N * TH * TW;
  const int64_t Cb = s.Cp / kB, Mb = s.Mp / kB;
  // Tiles per chunk: about 2 MB of transformed tiles and products per thread, in chunks of equal
  // size. With several threads each takes whole chunks (transform, K products, transform back)
  // with no barrier in between; the products then run on their thread alone, which scales better
  // than splitting every product's few rows between the threads.
  const int64_t most = std::max<int64_t>(32, (int64_t{2} << 20) / (4 * K * (s.Cp + s.Mp)));
  const int team = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, (T + 15) / 16)));
  // Fewer than 32 tiles per thread (14 x 14 and, in F(4x4, 3x3), 28 x 28 maps at batch 1): one
  // chunk, its transforms split by tiles and its products spread over the threads, with a barrier
  // between the phases (at 2 threads ResNet-18 9.6 -> 8.8 ms when its 7 x 7 maps ran here; they
  // had run on one thread).
  if (threads > 1 && T < 32 * threads && T <= most) return run_split(x, N, H, W, pads, y, OH, OW, r, threads);
  int64_t chunks = (T + most - 1) / most;
  chunks = (chunks + team - 1) / team * team;
  const int64_t chunk = (T + chunks - 1) / chunks;
  chunks = (T + chunk - 1) / chunk;
  std::lock_guard<std::mutex> lock(s.mu);
  const int64_t vsize = K * chunk * s.Cp, msize = K * chunk * s.Mp;
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
      s.in_tile(x + (n * Cb + cb) * H * W * kB, H, W, e * ty - pt, e * tx - pl, v + tl * s.Cp + cb * kB, rows * s.Cp);
    }
    Impl::Prim& p = rows == chunk ? *full : *last;
    void* sp = s.scratch.data() + per * static_cast<size_t>(tid);
    size_t space = per;
    memory scratch(p.scratchpad, engine(), std::align(64, p.scratchpad.get_size(), sp, space));
    s.products(p, rows, v, m, scratch, st);
    for (int64_t it = 0; it < rows * Mb; ++it) {
      const int64_t tl = it / Mb, mb = it % Mb, t = t0 + tl;
      const int64_t n = t / (TH * TW), ty = t / TW % TH, tx = t % TW;
      const int64_t plane = (n * Mb + mb) * OH * OW * kB;
      s.out_tile(m + tl * s.Mp + mb * kB, rows * s.Mp, y + plane, r ? r + plane : nullptr, OH, OW, e * ty, e * tx,
                 s.bias.data() + mb * kB, mb == Mb - 1 ? tail : 0xFFFF);
    }
  };
  std::atomic<bool> failed{false};
  if (team > 1 && chunks == team && omp_waits_passively() && !in_task() && !omp_in_parallel()) {
    // Idle threads sleep: the chunks are tasks (task_pool.h), each with the buffers of its own
    // index, so the caller starts at once and a helper takes the other chunk when it wakes.
    try {
      run_tasks(chunks, team, [&](int64_t c) {
        dnnl::stream st(engine());
        one_chunk(static_cast<int>(c), c, st);
      });
    } catch (...) {
      return false;
    }
  } else {
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
  }
  if (failed) return false;
  ++g_runs;
  if (s.tile == 4) ++g_runs4;
  return true;
}

bool WinogradConv::run_split(const float* x, int64_t N, int64_t H, int64_t W, const Dims& pads, float* y, int64_t OH,
                             int64_t OW, const float* r, int threads) {
  Impl& s = *impl_;
  const int64_t pt = pads[0], pl = pads[1];
  const int64_t e = s.tile, K = s.K();
  const int64_t TH = (OH + e - 1) / e, TW = (OW + e - 1) / e, T = N * TH * TW;
  const int64_t Cb = s.Cp / kB, Mb = s.Mp / kB;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.v.numel() < K * T * s.Cp) s.v = Tensor::uninitialized(DType::Float, {K * T * s.Cp});
  if (s.m.numel() < K * T * s.Mp) s.m = Tensor::uninitialized(DType::Float, {K * T * s.Mp});
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
  std::atomic<bool> failed{false};
  // The products: batched, one call that oneDNN spreads over the threads; else the threads take
  // whole products in turn.
  auto products = [&](int tid, int nth) {
    try {
      dnnl::stream st(engine());
      void* sp = s.scratch.data() + per * static_cast<size_t>(tid);
      size_t space = per;
      memory scratch(p->scratchpad, engine(), std::align(64, p->scratchpad.get_size(), sp, space));
      s.products(*p, T, v, m, scratch, st, tid, nth);
    } catch (...) {
      failed = true;
    }
  };
  auto in_tiles = [&](int64_t b, int64_t end) {
    for (int64_t it = b; it < end; ++it) {
      const int64_t t = it / Cb, cb = it % Cb;
      const int64_t n = t / (TH * TW), ty = t / TW % TH, tx = t % TW;
      s.in_tile(x + (n * Cb + cb) * H * W * kB, H, W, e * ty - pt, e * tx - pl, v + t * s.Cp + cb * kB, T * s.Cp);
    }
  };
  auto out_tiles = [&](int64_t b, int64_t end) {
    for (int64_t it = b; it < end; ++it) {
      const int64_t t = it / Mb, mb = it % Mb;
      const int64_t n = t / (TH * TW), ty = t / TW % TH, tx = t % TW;
      const int64_t plane = (n * Mb + mb) * OH * OW * kB;
      s.out_tile(m + t * s.Mp + mb * kB, T * s.Mp, y + plane, r ? r + plane : nullptr, OH, OW, e * ty, e * tx,
                 s.bias.data() + mb * kB, mb == Mb - 1 ? tail : 0xFFFF);
    }
  };
  if (omp_waits_passively()) {
    // Idle threads sleep: the transforms run as tasks (parallel_for), which the caller starts at
    // once instead of waiting for a woken thread's fixed share of each phase.
    parallel_for(T * Cb, threads, 1, in_tiles);
    if (s.batched) {
      products(0, 1);
    } else {
#pragma omp parallel num_threads(threads)
      products(omp_get_thread_num(), omp_get_num_threads());
    }
    if (failed) return false;
    parallel_for(T * Mb, threads, 1, out_tiles);
  } else {
#pragma omp parallel num_threads(threads)
    {
      const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
      const int64_t in_n = T * Cb;
      in_tiles(in_n * tid / nth, in_n * (tid + 1) / nth);
      if (!s.batched) {
#pragma omp barrier
        products(tid, nth);
      }
    }
    if (s.batched) products(0, 1);
    if (failed) return false;
#pragma omp parallel num_threads(threads)
    {
      const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
      const int64_t out_n = T * Mb;
      out_tiles(out_n * tid / nth, out_n * (tid + 1) / nth);
    }
  }
  if (failed) return false;
  ++g_runs;
  if (s.tile == 4) ++g_runs4;
  return true;
}

uint64_t WinogradConv::runs_so_far(int tile) { return tile == 4 ? g_runs4.load() : g_runs.load(); }

}  // namespace t2o::kern
