// oneDNN fast path for float MatMul and Gemm. A primitive is created once per shape and cached;
// a constant B is reordered once into the layout the primitive prefers (format_tag::any) and the
// packed copy is kept for every later run of that shape.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/matmul_util.h"

namespace t2o::kern {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

namespace {

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

}  // namespace

struct DnnlMatmul {
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f;
  bool gelu = false;
  Tensor const_b;  // 2-D, as stored (K x N, or N x K when trans_b); undefined when B is an input
  // The session dropped const_b's data (dnnl_matmul_release_b): packed[0] is the only copy, and
  // const_b keeps its dims with no data until plain_b restores it.
  bool released = false;
  struct Prim {
    dnnl::matmul prim;
    memory::desc w_desc;
    std::shared_ptr<memory> packed_b;  // for a constant B: the reordered weights
    memory::desc scratchpad;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool>;
  std::map<Key, Prim> cache;
  std::set<Key> rejected;  // shapes oneDNN refused: go straight to the reference kernel
  std::vector<std::shared_ptr<memory>> packed;  // the constant B in each layout made so far
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> scratchpad;  // for every shape; runs hold `mu`
  size_t scratchpad_size = 0;
  std::mutex mu;
};

namespace {

// B as stored: 2-D when a single B serves every product (see dnnl_matmul_run), else [batch, K, N].
memory::desc plain_b_desc(const DnnlMatmul& m, int64_t batch_b, int64_t K, int64_t N, bool two_d) {
  if (two_d) return memory::desc({K, N}, dt::f32, m.trans_b ? tag::ba : tag::ab);
  return memory::desc({batch_b, K, N}, dt::f32, m.trans_b ? tag::acb : tag::abc);
}

int64_t const_k(const DnnlMatmul& m) { return m.const_b.dim(m.trans_b ? 1 : 0); }
int64_t const_n(const DnnlMatmul& m) { return m.const_b.dim(m.trans_b ? 0 : 1); }

// The constant B as stored; after a release, rebuilt from the packed copy (an exact reorder) and
// kept, for the rare shape that needs it plain or in another layout. Caller holds m.mu.
const Tensor& plain_b(DnnlMatmul& m) {
  if (!m.released || m.const_b.raw()) return m.const_b;
  Tensor t = Tensor::uninitialized(DType::Float, m.const_b.dims());
  memory dst(plain_b_desc(m, 1, const_k(m), const_n(m), true), cpu_engine(), t.raw());
  dnnl::stream s(cpu_engine());
  dnnl::reorder(*m.packed.front(), dst).execute(s, *m.packed.front(), dst);
  s.wait();
  m.const_b = t;
  return m.const_b;
}

// The constant B in the layout `want`, reordered once and shared by every shape that wants it.
std::shared_ptr<memory> packed_b(DnnlMatmul& m, const memory::desc& want, int64_t K, int64_t N) {
  for (auto& p : m.packed)
    if (p->get_desc() == want) return p;
  plain_b(m);
  memory src(plain_b_desc(m, 1, K, N, want.dims().size() == 2), cpu_engine(), const_cast<void*>(m.const_b.raw()));
  auto dst = std::make_shared<memory>(want, cpu_engine());
  dnnl::stream s(cpu_engine());
  dnnl::reorder(src, *dst).execute(s, src, *dst);
  s.wait();
  m.packed.push_back(dst);
  return dst;
}

// A few rows times the packed constant B, read straight from oneDNN's packed copy when it is the
// panel layout oneDNN picks for small row counts: N in panels of 64 columns, each panel K rows of
// 64 contiguous floats (blocks of kb rows, inner blocks kb@K then 64@N). oneDNN's own kernel for
// a classifier head (1 x 1280 times 1280 x 1000, weights streamed from memory) ran at 13 GB/s
// here, this loop at 18-19.
struct PanelLayout {
  int64_t panel_stride = 0;  // floats from one 64-column panel to the next
};

bool panel_layout(const memory::desc& d, PanelLayout& out) {
  const dnnl_memory_desc_t& md = d.data;
  if (md.ndims != 2 || md.format_kind != dnnl_blocked || md.offset0 != 0) return false;
  const auto& b = md.format_desc.blocking;
  if (b.inner_nblks != 2 || b.inner_idxs[0] != 0 || b.inner_idxs[1] != 1 || b.inner_blks[1] != 64) return false;
  if (b.strides[0] != b.inner_blks[0] * 64) return false;  // K blocks follow each other in a panel
  out.panel_stride = b.strides[1];
  return out.panel_stride >= md.padded_dims[0] * 64;
}

constexpr int64_t kGemvMaxRows = 4;

// acc[r][0..63] = sum_k a[r][k] * panel[k][0..63] for R rows.
template <int R>
T2O_AVX512 void gemv_panel(const float* a, int64_t a_row, int64_t a_k, const float* w, int64_t K, float* acc) {
  __m512 s[R][4], t[R][4];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 4; ++v) s[r][v] = t[r][v] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 1 < K; k += 2, w += 128) {
    for (int r = 0; r < R; ++r) {
      const __m512 x0 = _mm512_set1_ps(a[r * a_row + k * a_k]), x1 = _mm512_set1_ps(a[r * a_row + (k + 1) * a_k]);
      for (int v = 0; v < 4; ++v) {
        s[r][v] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(w + 16 * v), s[r][v]);
        t[r][v] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(w + 64 + 16 * v), t[r][v]);
      }
    }
  }
  if (k < K)
    for (int r = 0; r < R; ++r) {
      const __m512 x0 = _mm512_set1_ps(a[r * a_row + k * a_k]);
      for (int v = 0; v < 4; ++v) s[r][v] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(w + 16 * v), s[r][v]);
    }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 4; ++v) _mm512_storeu_ps(acc + r * 64 + 16 * v, _mm512_add_ps(s[r][v], t[r][v]));
}

using GemvPanelFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, float*);

// c[rows, N] as dnnl_matmul_run's oneDNN primitive would compute it: alpha * (a b + bias), then
// + beta_sum * c (no GELU: on AVX-512 machines FusedMatMul applies it after the product).
void packed_gemv(const DnnlMatmul& m, const PanelLayout& lay, const float* w, int64_t rows, int64_t K, int64_t N,
                 const float* a, const float* bias, float beta_sum, float* c) {
  static const GemvPanelFn fns[kGemvMaxRows] = {gemv_panel<1>, gemv_panel<2>, gemv_panel<3>, gemv_panel<4>};
  const GemvPanelFn fn = fns[rows - 1];
  const int64_t a_row = m.trans_a ? 1 : K, a_k = m.trans_a ? rows : 1;
  const int64_t panels = (N + 63) / 64;
  const int threads = task_threads_for(omp_get_max_threads(), work_us(2.0 * rows * K * N, 4.0 * K * N));
  parallel_for(panels, threads, 1, [&](int64_t p0, int64_t p1) {
    alignas(64) float acc[kGemvMaxRows * 64];
    for (int64_t p = p0; p < p1; ++p) {
      fn(a, a_row, a_k, w + p * lay.panel_stride, K, acc);
      const int64_t n0 = p * 64, nn = std::min<int64_t>(64, N - n0);
      for (int64_t r = 0; r < rows; ++r) {
        float* y = c + r * N + n0;
        for (int64_t j = 0; j < nn; ++j) {
          float v = acc[r * 64 + j];
          if (bias) v += bias[n0 + j];
          v *= m.alpha;
          if (beta_sum != 0.0f) v += beta_sum * y[j];
          y[j] = v;
        }
      }
    }
  });
}

}  // namespace

bool dnnl_matmul_release_b(DnnlMatmul& m, const Tensor& placeholder) {
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.packed.empty() || !m.const_b.defined() || placeholder.dims() != m.const_b.dims()) return false;
  m.const_b = placeholder;
  m.released = true;
  return true;
}

bool dnnl_matmul_can_release_b(const DnnlMatmul& m) { return !m.packed.empty() && m.const_b.defined(); }

Tensor dnnl_matmul_plain_b(DnnlMatmul& m) {
  std::lock_guard<std::mutex> lock(m.mu);
  return plain_b(m);
}

std::shared_ptr<DnnlMatmul> dnnl_matmul_make(bool trans_a, bool trans_b, float alpha, const Tensor* const_b,
                                             bool gelu) {
  auto m = std::make_shared<DnnlMatmul>();
  m->trans_a = trans_a;
  m->trans_b = trans_b;
  m->alpha = alpha;
  m->gelu = gelu;
  if (const_b && const_b->dtype() == DType::Float && const_b->rank() == 2 && const_b->numel() > 0) {
    m->const_b = *const_b;
    // Pack at session build for a typical row count; the layout depends on K and N, so later
    // shapes usually find it ready (others pack once on first use).
    int64_t K = const_b->dim(trans_b ? 1 : 0), N = const_b->dim(trans_b ? 0 : 1);
    try {
      memory::desc a_md({64, K}, dt::f32, trans_a ? tag::ba : tag::ab);
      memory::desc b_md({K, N}, dt::f32, tag::any);
      memory::desc c_md({64, N}, dt::f32, tag::ab);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), cpu_engine());
      packed_b(*m, pd.weights_desc(), K, N);
    } catch (const dnnl::error&) {
      // Packing will be tried again per shape at run time.
    }
  }
  return m;
}

bool dnnl_matmul_run(DnnlMatmul& m, int64_t batch_a, int64_t batch_b, int64_t M, int64_t K, int64_t N,
                     const float* a, const float* b, const float* bias, float beta_sum, float* c) {
  if (!b && !m.const_b.defined()) return false;
  // oneDNN divides by these while choosing a kernel (SIGFPE on a zero); callers handle empties.
  if (batch_a <= 0 || batch_b <= 0 || M <= 0 || K <= 0 || N <= 0) return false;
  int64_t batch = std::max(batch_a, batch_b);
  try {
    std::lock_guard<std::mutex> lock(m.mu);
    auto key = std::make_tuple(batch_a, batch_b, M, K, N, bias != nullptr, beta_sum != 0.0f);
    if (m.rejected.count(key)) return false;
    auto it = m.cache.find(key);
    // One B for all products: a single 2-D product of the stacked A rows. oneDNN's f32 kernels
    // run a batch-1 3-D matmul at about half the speed of the same 2-D one (plain weights).
    const bool two_d = batch_b == 1 && (batch_a == 1 || !m.trans_a);
    memory::desc a_md, b_plain, c_md, bias_md;
    if (two_d) {
      int64_t rows = batch_a * M;
      a_md = memory::desc({rows, K}, dt::f32, m.trans_a ? tag::ba : tag::ab);
      b_plain = plain_b_desc(m, 1, K, N, true);
      c_md = memory::desc({rows, N}, dt::f32, tag::ab);
      bias_md = memory::desc({1, N}, dt::f32, tag::ab);
    } else {
      a_md = memory::desc({batch_a, M, K}, dt::f32, m.trans_a ? tag::acb : tag::abc);
      b_plain = plain_b_desc(m, batch_b, K, N, false);
      c_md = memory::desc({batch, M, N}, dt::f32, tag::abc);
      bias_md = memory::desc({1, 1, N}, dt::f32, tag::abc);
    }
    memory::dims bd = b_plain.dims();
    if (it == m.cache.end()) {
      // Inputs with ever-changing shapes must not grow the cache without bound; the packed
      // weights live on in m.packed.
      if (m.cache.size() >= 64) m.cache.clear();
      bool packed = !b;
      memory::desc b_md = packed ? memory::desc(bd, dt::f32, tag::any) : b_plain;
      dnnl::primitive_attr attr;
      // Our scratchpad, not oneDNN's per-thread one: the primitive may run on any thread.
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      if (m.alpha != 1.0f) attr.set_output_scales(0, {m.alpha});
      if (beta_sum != 0.0f || m.gelu) {
        dnnl::post_ops po;
        if (beta_sum != 0.0f) po.append_sum(beta_sum);
        if (m.gelu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
        attr.set_post_ops(po);
      }
      auto d = bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md) : dnnl::matmul::desc(a_md, b_md, c_md);
      dnnl::matmul::primitive_desc pd;
      try {
        pd = dnnl::matmul::primitive_desc(d, attr, cpu_engine());
      } catch (const dnnl::error&) {
        m.rejected.insert(key);
        return false;
      }
      DnnlMatmul::Prim p{dnnl::matmul(pd), pd.weights_desc(), nullptr, pd.scratchpad_desc()};
      if (packed) p.packed_b = packed_b(m, p.w_desc, K, N);
      it = m.cache.emplace(key, std::move(p)).first;
    }
    DnnlMatmul::Prim& p = it->second;
    PanelLayout lay;
    if (two_d && p.packed_b && batch_a * M <= kGemvMaxRows && !m.gelu &&
        panel_layout(p.w_desc, lay) && has_avx512()) {
      packed_gemv(m, lay, static_cast<const float*>(p.packed_b->get_data_handle()), batch_a * M, K, N, a, bias,
                  beta_sum, c);
      return true;
    }
    memory am(a_md, cpu_engine(), const_cast<float*>(a));
    memory cm(c_md, cpu_engine(), c);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, am}, {DNNL_ARG_DST, cm}};
    if (p.packed_b) args.emplace(DNNL_ARG_WEIGHTS, *p.packed_b);
    else args.emplace(DNNL_ARG_WEIGHTS, memory(b_plain, cpu_engine(), const_cast<float*>(b)));
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(bias_md, cpu_engine(), const_cast<float*>(bias)));
    if (size_t n = p.scratchpad.get_size()) {
      if (n > m.scratchpad_size) {
        m.scratchpad.reset(std::aligned_alloc(64, (n + 63) / 64 * 64));
        if (!m.scratchpad) return false;
        m.scratchpad_size = n;
      }
      args.emplace(DNNL_ARG_SCRATCHPAD, memory(p.scratchpad, cpu_engine(), m.scratchpad.get()));
    }
    dnnl::stream s(cpu_engine());
    p.prim.execute(s, args);
    s.wait();
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace t2o::kern
