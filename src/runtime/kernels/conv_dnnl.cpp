// oneDNN primitives behind DnnlConv / DnnlPool (see conv_dnnl.h).
#include "runtime/kernels/conv_dnnl.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>
#include <vector>

#include "runtime/kernels/avx512_math.h"
#include "runtime/kernels/util.h"

namespace t2o::kern {

namespace {

using dnnl::memory;

// Inputs over this many bytes take one part per thread when a conv is cut (Impl::split).
constexpr int64_t kPartsInputL2 = 1 << 20;

std::atomic<uint64_t> g_part_runs{0};
std::atomic<uint64_t> g_extra_layouts{0};

// One CPU engine for the process. Streams are per thread so that sessions run from different
// threads never share one (a CPU stream is a cheap handle).
dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// Grow-only aligned buffers for blocked copies of activations, reordered run-time weights and
// oneDNN scratchpads. Kernels of one graph run one at a time on a thread, so four per thread
// (src, dst, weights, scratchpad) serve every node instead of one per node, and threads running
// the same node never share one.
class Scratch {
 public:
  ~Scratch() { ::operator delete(p_, std::align_val_t(64)); }
  void* get(size_t bytes) {
    if (bytes > cap_) {
      ::operator delete(p_, std::align_val_t(64));
      p_ = ::operator new(bytes, std::align_val_t(64));
      cap_ = bytes;
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t cap_ = 0;
};
Scratch& scratch(int i) {
  thread_local Scratch s[4];
  return s[i];
}

// oneDNN's own scratchpad belongs to the thread that created a primitive (a cached primitive run
// on another thread would use that thread's, possibly too small). Cached primitives therefore
// take the executing thread's scratchpad, so one Session can run on many threads at once.
dnnl::primitive_attr user_scratchpad(dnnl::primitive_attr attr = {}) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}
void execute(const dnnl::primitive& p, const memory::desc& scratchpad, std::unordered_map<int, memory> args) {
  if (size_t n = scratchpad.get_size()) args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratchpad, engine(), scratch(3).get(n)));
  p.execute(stream(), args);
}
// A cached reorder and its scratchpad.
struct Reorder {
  dnnl::reorder prim;
  memory::desc scratchpad;
  Reorder() = default;
  Reorder(const memory::desc& from, const memory::desc& to) {
    dnnl::reorder::primitive_desc pd(engine(), from, engine(), to, user_scratchpad());
    prim = dnnl::reorder(pd);
    scratchpad = pd.scratchpad_desc();
  }
  void run(memory& from, memory& to) const { execute(prim, scratchpad, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}); }
};

memory::dims mdims(const Dims& d) { return memory::dims(d.begin(), d.end()); }

memory::desc plain_desc(const Dims& d) {
  return memory::desc(mdims(d), memory::data_type::f32, mdims(strides_of(d)));
}

memory::desc any_desc(const Dims& d) {
  return memory::desc(mdims(d), memory::data_type::f32, memory::format_tag::any);
}

// The ONNX weight tensor described in oneDNN's logical order ([G,] OC, IC, k...).
memory::desc user_weights_desc(bool transpose, int64_t group, const Dims& w) {
  int64_t ksz = 1;
  for (size_t i = 2; i < w.size(); ++i) ksz *= w[i];
  Dims kdims(w.begin() + 2, w.end());
  Dims kstr = strides_of(kdims);
  Dims dims, str;
  if (!transpose) {  // w: M x C/g x k
    int64_t mg = w[0] / group, cg = w[1];
    if (group > 1) dims = {group, mg, cg}, str = {mg * cg * ksz, cg * ksz, ksz};
    else dims = {w[0], cg}, str = {cg * ksz, ksz};
  } else {  // w: C x M/g x k
    int64_t cg = w[0] / group, mg = w[1];
    if (group > 1) dims = {group, mg, cg}, str = {cg * mg * ksz, ksz, mg * ksz};
    else dims = {mg, w[0]}, str = {ksz, mg * ksz};
  }
  dims.insert(dims.end(), kdims.begin(), kdims.end());
  str.insert(str.end(), kstr.begin(), kstr.end());
  return memory::desc(mdims(dims), memory::data_type::f32, mdims(str));
}

Dims minus_one(const Dims& d) {
  Dims r(d);
  for (auto& v : r) --v;
  return r;
}

// End padding that makes oneDNN's output-size formula give exactly g.out (it may be negative for
// transposed convs with output_padding, or larger than pe in ceil mode).
Dims effective_end_pad(const Geom& g, bool transpose) {
  Dims pr(static_cast<size_t>(g.nsp));
  for (size_t i = 0; i < pr.size(); ++i) {
    int64_t ext = (g.k[i] - 1) * g.dil[i] + 1;
    pr[i] = transpose ? (g.in[i] - 1) * g.stride[i] + ext - g.pb[i] - g.out[i]
                      : (g.out[i] - 1) * g.stride[i] + ext - g.in[i] - g.pb[i];
  }
  return pr;
}

void reorder(memory& from, memory& to) {
  dnnl::reorder(from, to).execute(stream(), from, to);
}

dnnl::primitive_attr post_attr(const std::vector<ConvPostOp>& post) {
  dnnl::primitive_attr attr;
  if (post.empty()) return attr;
  dnnl::post_ops po;
  using K = ConvPostOp::Kind;
  for (const ConvPostOp& p : post) {
    switch (p.kind) {
      case K::Sum: po.append_sum(1.0f); break;
      case K::Relu: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, p.alpha, 0.0f); break;
      case K::Clip: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, p.alpha, p.beta); break;
      case K::Swish: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f); break;
      case K::HardSwish: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f); break;
    }
  }
  attr.set_post_ops(po);
  return attr;
}

memory::desc blocked_desc(const Dims& logical, int64_t blk) {
  return memory::desc(mdims(logical), memory::data_type::f32,
                      blk == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c);
}

memory::desc user_desc(const Dims& logical, int64_t blk) { return blk ? blocked_desc(logical, blk) : plain_desc(logical); }

bool has_sum(const std::vector<ConvPostOp>& post) {
  for (const ConvPostOp& p : post)
    if (p.kind == ConvPostOp::Kind::Sum) return true;
  return false;
}

// SiLU over n floats in place. oneDNN's swish post-op took 0.67 ms over EfficientNet-B0's
// 112 x 112 x 96 expansion on a Zen 4 core (the conv itself 0.43 ms); this pass about 0.35 ms.
T2O_AVX512_WARNINGS_OFF
struct SwishVec {
  T2O_AVX512 __m512 operator()(__m512 v) const { return swish512(v); }
};
T2O_AVX512 void swish_range(float* y, int64_t n) { map512_inplace(y, n, SwishVec{}); }
T2O_AVX512_WARNINGS_ON

}  // namespace

int64_t channel_block() {
  static const int64_t b = [] {
    auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core ? 16 : 8;
  }();
  return b;
}

Dims blocked_dims(const Dims& d, int64_t blk) {
  if (d.size() != 4) throw Error("blocked layout needs a 4-d tensor, got " + dims_to_string(d));
  return {d[0], (d[1] + blk - 1) / blk, d[2], d[3], blk};
}

Dims logical_dims(const Dims& b, int64_t c) {
  if (b.size() != 5 || b[1] != (c + b[4] - 1) / b[4])
    throw Error("blocked tensor " + dims_to_string(b) + " does not hold " + std::to_string(c) + " channels");
  return {b[0], c, b[2], b[3]};
}

void to_plain(const Tensor& blocked, Tensor& plain) {
  memory from(blocked_desc(plain.dims(), blocked.dims().back()), engine(), const_cast<void*>(blocked.raw()));
  memory to(plain_desc(plain.dims()), engine(), plain.raw());
  reorder(from, to);
  stream().wait();
}

void to_blocked(const Tensor& plain, Tensor& blocked) {
  memory from(plain_desc(plain.dims()), engine(), const_cast<void*>(plain.raw()));
  memory to(blocked_desc(plain.dims(), blocked.dims().back()), engine(), blocked.raw());
  reorder(from, to);
  stream().wait();
}

// Plain form of the post-ops over a finished f32 conv output `c` (in place when it can); the
// result's dims broadcast with the residual's, as the unfused Add would.
// `first`: post-ops before it were already applied.
Tensor apply_post_ops_ref(const KernelContext& ctx, const std::vector<ConvPostOp>& post, Tensor c, const Tensor* residual,
                          size_t first) {
  size_t i = first;
  for (; i < post.size() && post[i].kind != ConvPostOp::Kind::Sum; ++i) {
    float* p = c.data<float>();
    for (int64_t j = 0; j < c.numel(); ++j) p[j] = post[i].apply(p[j]);
  }
  if (i == post.size()) return c;
  if (!residual || residual->dtype() != DType::Float) ctx.fail("the residual input must be f32");
  Dims od = broadcast_dims(ctx, c.dims(), residual->dims());
  Tensor sum = od == c.dims() ? c : Tensor(DType::Float, od);
  Dims sa = broadcast_strides(c.dims(), od), sr = broadcast_strides(residual->dims(), od);
  const float *pa = c.data<float>(), *pr = residual->data<float>();
  float* po = sum.data<float>();
  for_each_broadcast(od, {sa, sr}, [&](int64_t j, const int64_t* off) { po[j] = pa[off[0]] + pr[off[1]]; });
  for (++i; i < post.size(); ++i)
    for (int64_t j = 0; j < sum.numel(); ++j) po[j] = post[i].apply(po[j]);
  return sum;
}

std::vector<ConvPostOp> conv_post_ops(const Node& n) {
  using K = ConvPostOp::Kind;
  std::vector<std::string> kinds = n.attr_strings("post_ops");
  std::vector<float> a = n.attr_floats("post_alpha"), b = n.attr_floats("post_beta");
  if (a.size() != kinds.size() || b.size() != kinds.size())
    throw Error(n.describe() + ": post_alpha and post_beta need one value per post-op");
  std::vector<ConvPostOp> ops;
  for (size_t i = 0; i < kinds.size(); ++i) {
    const std::string& k = kinds[i];
    K kind = k == "relu" ? K::Relu : k == "clip" ? K::Clip : k == "swish" ? K::Swish
           : k == "hardswish" ? K::HardSwish : K::Sum;
    if (kind == K::Sum && k != "sum") throw Error(n.describe() + ": unknown post-op '" + k + "'");
    ops.push_back({kind, a[i], b[i]});
  }
  return ops;
}

float ConvPostOp::apply(float x) const {
  switch (kind) {
    case Kind::Relu: return x < 0 ? (alpha == 0 ? 0.0f : alpha * x) : x;  // NaN kept; -inf to 0 at slope 0
    case Kind::Clip: return std::min(std::max(x, alpha), beta);
    case Kind::Swish: return x / (1.0f + std::exp(-x));
    case Kind::HardSwish: return x * std::max(0.0f, std::min(1.0f, x / 6.0f + 0.5f));
    case Kind::Sum: return x;
  }
  return x;
}

struct DnnlConv::Impl {
  bool transpose;
  int64_t group;
  std::vector<ConvPostOp> post;
  // With AVX-512, a last Swish may run as swish_range over the output instead of as oneDNN's
  // post-op (`own_swish`); `dnnl_post` is then what oneDNN applies. It does on one thread and in
  // the parts of a conv cut into tasks, where the output is in the cache of the thread that wrote
  // it; a primitive run on several threads keeps oneDNN's post-op, which scales with it
  // (EfficientNet-B0 at 2 threads, 112 x 112 x 16 -> 96: 536-620 us against 611-723 with the pass;
  // 56 x 56 x 24 -> 144: 250-306 against 284-334).
  bool own_swish = false;
  std::vector<ConvPostOp> dnnl_post;
  int64_t src_blk = 0, dst_blk = 0, res_blk = 0;
  struct Entry {
    bool ok = false;
    dnnl::primitive prim;
    memory::desc src_md, wei_md, dst_md, src_user, dst_user, wei_user, res_user;
    memory::desc scratchpad;
    bool src_re = false, dst_re = false, wei_re = false, res_re = false;
    bool swish_pass = false;  // prim leaves the last Swish to swish_range (parts always do, see own_swish)
    Reorder src_r, dst_r, res_r;
    // When idle threads sleep: the conv cut into single-threaded convs over ranges of output
    // channel blocks, run as tasks (task_pool.h). Each writes its own blocks of y and reads its
    // slice of the packed weights (whose output blocks are outermost) and of the bias.
    struct Part {
      dnnl::primitive prim;
      memory::desc dst_md, wei_md, scratchpad;
      int64_t oc0 = 0, oc = 0;  // first output channel and count
      size_t wei_off = 0;       // bytes into the packed weights
    };
    std::vector<Part> parts;
  };
  // Entries are shared so that clearing the cache never frees one another thread is running;
  // `mu` guards the cache and `packed`, never the execution.
  std::mutex mu;
  std::map<Dims, std::shared_ptr<const Entry>> cache;
  bool constant = false;
  Tensor const_w;  // no data after release() until plain_locked() rebuilds it
  std::vector<std::pair<memory::desc, memory>> packed;  // constant weights per oneDNN layout

  // The constant weights as given; after a release, rebuilt from the first packed copy (an exact
  // reorder) and kept. Caller holds mu.
  const Tensor& plain_locked() {
    if (const_w.raw() || const_w.numel() == 0 || packed.empty()) return const_w;
    Tensor t = Tensor::uninitialized(DType::Float, const_w.dims());
    memory to(user_weights_desc(transpose, group, const_w.dims()), engine(), t.raw());
    reorder(packed.front().second, to);
    stream().wait();
    const_w = t;
    return const_w;
  }

  // Activation layouts a primitive is asked for: as stored (a blocked side fixes its layout,
  // oneDNN picks the other and we reorder), both sides blocked, or both channels-last.
  enum class Act { AsStored, AllBlocked, ChannelsLast };
  dnnl::primitive_desc make_pd(const Dims& xd, const Dims& wd, bool bias, const Geom& g, const Dims& yd,
                               Act act = Act::AsStored, bool swish_pass = false) const {
    int64_t blk = act == Act::AllBlocked ? std::max(src_blk, dst_blk) : 0;
    memory::desc src = src_blk ? blocked_desc(xd, src_blk) : blk ? blocked_desc(xd, blk) : any_desc(xd);
    memory::desc dst = dst_blk ? blocked_desc(yd, dst_blk) : blk ? blocked_desc(yd, blk) : any_desc(yd);
    if (act == Act::ChannelsLast) {
      src = memory::desc(mdims(xd), memory::data_type::f32, memory::format_tag::nhwc);
      dst = memory::desc(mdims(yd), memory::data_type::f32, memory::format_tag::nhwc);
    }
    memory::desc wei(user_weights_desc(transpose, group, wd).dims(), memory::data_type::f32, memory::format_tag::any);
    memory::desc b({yd[1]}, memory::data_type::f32, memory::format_tag::a);
    auto st = mdims(g.stride), di = mdims(minus_one(g.dil)), pl = mdims(g.pb), pr = mdims(effective_end_pad(g, transpose));
    auto fwd = dnnl::prop_kind::forward_inference;
    dnnl::primitive_attr attr = user_scratchpad(post_attr(swish_pass ? dnnl_post : post));
    if (!transpose) {
      auto d = bias ? dnnl::convolution_forward::desc(fwd, dnnl::algorithm::convolution_direct, src, wei, b, dst, st, di, pl, pr)
                    : dnnl::convolution_forward::desc(fwd, dnnl::algorithm::convolution_direct, src, wei, dst, st, di, pl, pr);
      return dnnl::convolution_forward::primitive_desc(d, attr, engine());
    }
    auto d = bias ? dnnl::deconvolution_forward::desc(fwd, dnnl::algorithm::deconvolution_direct, src, wei, b, dst, st, di, pl, pr)
                  : dnnl::deconvolution_forward::desc(fwd, dnnl::algorithm::deconvolution_direct, src, wei, dst, st, di, pl, pr);
    return dnnl::deconvolution_forward::primitive_desc(d, attr, engine());
  }

  // The primitive for this conv. Spatial 2-d convs (kernel larger than 1 x 1, one group, more
  // than 16 channels each side) run channels-last when oneDNN has its brgemm kernel for them, with
  // the activations reordered around it: on AVX-512 that kernel keeps more of the FMA peak than
  // the blocked direct one (a 3x3 stride-2 512-channel conv on a 14 x 14 map 1.96 -> 1.69 ms, 256
  // channels on 28 x 28 1.38 -> 1.08, with its weights out of cache; 7x7 and 5x5 kernels,
  // dilated 3x3, 24 channels on 56 x 56 5-40% faster; the reorders are a few percent of that;
  // with 16 channels it was 10% slower). With one side fixed blocked and the other open, oneDNN
  // may settle for its reference implementation (seen for small depthwise convs writing plain
  // output); both sides blocked then usually get a jit kernel, at the price of one reorder.
  dnnl::primitive_desc pick_pd(const Dims& xd, const Dims& wd, bool bias, const Geom& g, const Dims& yd,
                               bool swish_pass = false) {
    auto impl = [](const dnnl::primitive_desc& p) { return std::string(p.impl_info_str()); };
    // With idle threads asleep, a conv that can be cut into tasks (split) keeps the layouts as
    // stored: the channels-last brgemm conv would run as one OpenMP region between two reorders,
    // each waiting for a woken thread. (ResNet-50 at 2 threads, passive, stride-2 convs: 56 x 56 x
    // 128 1.36-1.40 -> 1.07-1.09 ms, 28 x 28 x 256 1.22-1.30 -> 1.09-1.21; 7 x 7 x 512 the same.)
    const bool cut = omp_waits_passively() && omp_get_max_threads() > 1 && cuttable(xd, yd);
    if (!cut && !transpose && group == 1 && g.nsp == 2 && g.k[0] * g.k[1] > 1 && xd[1] > 16 && yd[1] > 16 &&
        channel_block() == 16) {
      try {
        auto cl = make_pd(xd, wd, bias, g, yd, Act::ChannelsLast, swish_pass);
        // Not when the constant weights are packed already for another kernel (the one picked for
        // a conv of one image cut into tasks, at prepack): a second layout would hold two more
        // copies of the weights (plain and packed); that kernel runs this shape too. (ResNet-50 at
        // batch 8, 2 threads, passive: peak RSS 293 -> 323 MB before this.)
        if (impl(cl).rfind("brg", 0) == 0 && !packed_in_another_layout(cl.weights_desc())) return cl;
      } catch (const dnnl::error&) {
        // No channels-last primitive: the layouts as stored.
      }
    }
    auto pd = make_pd(xd, wd, bias, g, yd, Act::AsStored, swish_pass);
    if (impl(pd).rfind("ref", 0) == 0 && (src_blk || dst_blk)) {
      try {
        auto blocked = make_pd(xd, wd, bias, g, yd, Act::AllBlocked, swish_pass);
        if (impl(blocked).rfind("ref", 0) != 0) return blocked;
      } catch (const dnnl::error&) {
        // Keep the reference implementation.
      }
    }
    return pd;
  }

  Dims out_dims(const Dims& xd, const Dims& wd, const Geom& g) const {
    Dims yd{xd[0], transpose ? wd[1] * group : wd[0]};
    yd.insert(yd.end(), g.out.begin(), g.out.end());
    return yd;
  }

  // Whether a conv of these dims may be cut into parts (split() also needs its primitive to read
  // and write the tensors as stored): one image, more than one output block of 16, blocked output
  // (and residual), constant weights.
  bool cuttable(const Dims& xd, const Dims& yd) const {
    return constant && !transpose && group == 1 && dst_blk == 16 && (!has_sum(post) || res_blk == 16) &&
           xd.size() == 4 && xd[0] == 1 && yd[1] > 16;
  }

  // Cuts the conv of entry e into parts (see Entry::Part) when that needs no reorder: one image,
  // a blocked output (and residual), an input as the conv reads it (blocked, or plain for a first
  // conv), constant weights packed with output blocks outermost.
  // Leaves e.parts empty otherwise.
  void split(Entry& e, const Dims& xd, const Dims& wd, bool bias, const Geom& g, const Dims& yd, int threads) const {
    const int64_t blk = 16, ocb = (yd[1] + blk - 1) / blk;
    if (!cuttable(xd, yd) || e.src_re || e.dst_re || e.res_re) return;
    // Output blocks outermost: blocked inputs, and plain ones (a first conv's few channels).
    memory::format_tag wtag = memory::format_tag::undef;
    for (auto t : {memory::format_tag::OIhw16i16o, memory::format_tag::Ohwi16o})
      if (e.wei_md == memory::desc(mdims(wd), memory::data_type::f32, t)) wtag = t;
    if (wtag == memory::format_tag::undef) return;
    // Three parts per thread: a helper that wakes late then holds up the caller by one small part
    // at most. (MobileNetV2 at 2 threads: with one part per thread, 4.7 ms in some processes and
    // 6.9 ms, about one thread's time, in others; with three, 4.7-4.9 ms in every one.)
    // But every part reads the whole input: one larger than L2 (1 MB on the machines measured)
    // comes from L3 once per part, so such convs take one part per thread. (ResNet-50 at
    // 2 threads, per conv: 28 x 28 x 512 -> 128 0.66-0.73 -> 0.53 ms, 56 x 56 x 256 -> 128
    // 1.31-1.49 -> 0.99-1.03 ms; spinning threads: 0.49 and 0.97. MobileNetV2's 112 x 112 x 16,
    // 0.8 MB, went 0.24-0.25 -> 0.26-0.27 ms with one part per thread: it keeps three.)
    const int64_t per_thread = numel_of(xd) * 4 > kPartsInputL2 ? 1 : 3;
    const int64_t n = std::min<int64_t>(ocb, per_thread * static_cast<int64_t>(threads));
    const size_t block_bytes = e.wei_md.get_size() / static_cast<size_t>(ocb);
    OmpThreadLimit one(1);
    std::vector<Entry::Part> parts;
    try {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t b0 = ocb * i / n, b1 = ocb * (i + 1) / n;
        Entry::Part p;
        p.oc0 = b0 * blk;
        p.oc = std::min(b1 * blk, yd[1]) - p.oc0;
        Dims wp = wd, yp = yd;
        wp[0] = yp[1] = p.oc;
        auto pd = make_pd(xd, wp, bias, g, yp, Act::AsStored, own_swish);
        if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0 || !(pd.src_desc() == e.src_md) ||
            !(pd.dst_desc() == blocked_desc(yp, blk)) ||
            !(pd.weights_desc() == memory::desc(mdims(wp), memory::data_type::f32, wtag)))
          return;
        p.prim = dnnl::primitive(pd);
        p.dst_md = pd.dst_desc();
        p.wei_md = pd.weights_desc();
        p.scratchpad = pd.scratchpad_desc();
        p.wei_off = static_cast<size_t>(b0) * block_bytes;
        parts.push_back(std::move(p));
      }
    } catch (const dnnl::error&) {
      return;
    }
    e.parts = std::move(parts);
  }

  // The packed copy in layout md, or nullptr. Caller holds mu.
  memory* packed_locked(const memory::desc& md) {
    for (auto& [d, m] : packed)
      if (d == md) return &m;
    return nullptr;
  }

  // Whether the constant weights are packed, but not in layout md.
  bool packed_in_another_layout(const memory::desc& md) {
    std::lock_guard<std::mutex> lock(mu);
    return !packed.empty() && !packed_locked(md);
  }

  memory packed_for(const memory::desc& md) {
    std::lock_guard<std::mutex> lock(mu);
    if (memory* m = packed_locked(md)) return *m;
    plain_locked();
    memory user(user_weights_desc(transpose, group, const_w.dims()), engine(), const_cast<void*>(const_w.raw()));
    memory m(md, engine());
    reorder(user, m);
    stream().wait();
    if (!packed.empty()) g_extra_layouts.fetch_add(1, std::memory_order_relaxed);
    packed.emplace_back(md, m);
    return packed.back().second;
  }
};

DnnlConv::DnnlConv(bool transpose, int64_t group, std::vector<ConvPostOp> post) : impl_(std::make_unique<Impl>()) {
  impl_->transpose = transpose;
  impl_->group = group;
  impl_->post = std::move(post);
  impl_->own_swish = has_avx512() && !impl_->post.empty() && impl_->post.back().kind == ConvPostOp::Kind::Swish;
  impl_->dnnl_post = impl_->post;
  if (impl_->own_swish) impl_->dnnl_post.pop_back();
}
DnnlConv::~DnnlConv() = default;

void DnnlConv::set_layout(int64_t src_blk, int64_t dst_blk, int64_t res_blk) {
  impl_->src_blk = src_blk;
  impl_->dst_blk = dst_blk;
  impl_->res_blk = res_blk;
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->cache.clear();
}

void DnnlConv::prepack(const Tensor& w, const Tensor* bias, int64_t channels, const Geom& probe) {
  impl_->constant = true;
  impl_->const_w = w;
  Dims xd{1, channels};
  xd.insert(xd.end(), probe.in.begin(), probe.in.end());
  try {
    auto pd = impl_->pick_pd(xd, w.dims(), bias != nullptr, probe, impl_->out_dims(xd, w.dims(), probe));
    impl_->packed_for(pd.weights_desc());
  } catch (const dnnl::error&) {
    // Packed lazily at the first run instead.
  }
}

bool DnnlConv::can_release() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->constant && !impl_->packed.empty() && impl_->const_w.raw();
}

bool DnnlConv::release(const Tensor& placeholder) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& s = *impl_;
  if (!s.constant || s.packed.empty() || placeholder.dims() != s.const_w.dims() || placeholder.raw()) return false;
  s.const_w = placeholder;
  return true;
}

uint64_t DnnlConv::runs_in_parts_so_far() { return g_part_runs.load(std::memory_order_relaxed); }
uint64_t DnnlConv::extra_layouts_so_far() { return g_extra_layouts.load(std::memory_order_relaxed); }

Tensor DnnlConv::plain_weights() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->plain_locked();
}

void DnnlConv::drop_packed() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->packed.clear();
}

bool DnnlConv::run(const Tensor& x, const Tensor& w, const Tensor* b, const Geom& g, Tensor& y,
                   const Tensor* residual) {
  Impl& s = *impl_;
  Dims xd = s.src_blk ? logical_dims(x.dims(), s.transpose ? w.dim(0) : w.dim(1) * s.group) : x.dims();
  Dims yd = s.out_dims(xd, w.dims(), g);
  if ((s.dst_blk ? blocked_dims(yd, s.dst_blk) : yd) != y.dims()) return false;
  if (!has_sum(s.post)) residual = nullptr;
  else if (!residual || residual->dtype() != DType::Float ||
           residual->dims() != (s.res_blk ? blocked_dims(yd, s.res_blk) : yd))
    return false;
  // Small convs run on one thread when waking another costs more than it saves; the primitive
  // is made under the same limit (oneDNN fixes its partitioning when it makes one), so the
  // thread count is part of the cache key. Multiply-adds: each output (input, when transposed)
  // element meets one output (input) channel's share of the weights.
  const Dims& per = s.transpose ? xd : yd;
  double macs = static_cast<double>(w.numel()) / static_cast<double>(std::max<int64_t>(1, per[1]));
  for (int64_t d : per) macs *= static_cast<double>(d);
  // Convs that can be cut into tasks (Impl::split) wake a sleeping thread at a lower cost.
  const double us = work_us(2 * macs, 4.0 * static_cast<double>(x.numel() + y.numel() + w.numel()));
  const int threads = s.cuttable(xd, yd) ? task_threads_for(omp_get_max_threads(), us)
                                         : threads_for(omp_get_max_threads(), us);
  OmpThreadLimit limit(threads);
  Dims key = x.dims();
  key.insert(key.end(), w.dims().begin(), w.dims().end());
  key.push_back(b ? 1 : 0);
  key.push_back(threads);
  std::shared_ptr<const Impl::Entry> found;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.cache.find(key);
    if (it != s.cache.end()) found = it->second;
  }
  if (!found) {
    // Built outside the lock (primitive creation is slow); two threads may both build one.
    auto made = std::make_shared<Impl::Entry>();
    Impl::Entry& e = *made;
    try {
      e.swish_pass = s.own_swish && threads == 1;
      auto pd = s.pick_pd(xd, w.dims(), b != nullptr, g, yd, e.swish_pass);
      e.prim = dnnl::primitive(pd);
      e.scratchpad = pd.scratchpad_desc();
      e.src_md = pd.src_desc();
      e.wei_md = pd.weights_desc();
      e.dst_md = pd.dst_desc();
      e.src_user = user_desc(xd, s.src_blk);
      e.dst_user = user_desc(yd, s.dst_blk);
      e.res_user = user_desc(yd, s.res_blk);
      e.wei_user = user_weights_desc(s.transpose, s.group, w.dims());
      e.src_re = !(e.src_md == e.src_user);
      e.dst_re = !(e.dst_md == e.dst_user);
      e.wei_re = !(e.wei_md == e.wei_user);
      if (e.src_re) e.src_r = Reorder(e.src_user, e.src_md);
      if (e.dst_re) e.dst_r = Reorder(e.dst_md, e.dst_user);
      e.res_re = has_sum(s.post) && !(e.res_user == e.dst_md);
      if (e.res_re) e.res_r = Reorder(e.res_user, e.dst_md);
      e.ok = true;
      if (threads > 1 && omp_waits_passively()) s.split(e, xd, w.dims(), b != nullptr, g, yd, threads);
    } catch (const dnnl::error&) {
      e.ok = false;
    }
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.cache.size() >= 16) s.cache.clear();  // shapes keep changing: do not grow without bound
    found = s.cache.emplace(key, std::move(made)).first->second;
  }
  const Impl::Entry& e = *found;
  if (!e.ok) return false;

  // In place (y is the residual's buffer) only when the residual need not be reordered into it.
  if (residual && residual->raw() == y.raw() && e.res_re && !e.dst_re) return false;
  if (!e.parts.empty() && !in_task() && !omp_in_parallel()) {
    memory wei = s.packed_for(e.wei_md);
    const char* wbase = static_cast<const char*>(wei.get_data_handle());
    const int64_t plane = yd[2] * yd[3];
    run_tasks(static_cast<int64_t>(e.parts.size()), threads, [&](int64_t i) {
      const Impl::Entry::Part& p = e.parts[static_cast<size_t>(i)];
      float* yp = y.data<float>() + p.oc0 * plane;  // one image: output block k starts at k * 16 * plane
      if (residual && residual->raw() != y.raw())
        std::memcpy(yp, residual->data<float>() + p.oc0 * plane, p.dst_md.get_size());
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, memory(e.src_md, engine(), const_cast<void*>(x.raw()))},
          {DNNL_ARG_WEIGHTS, memory(p.wei_md, engine(), const_cast<char*>(wbase + p.wei_off))},
          {DNNL_ARG_DST, memory(p.dst_md, engine(), yp)}};
      if (b)
        args.emplace(DNNL_ARG_BIAS, memory({{p.oc}, memory::data_type::f32, memory::format_tag::a}, engine(),
                                           const_cast<float*>(b->data<float>() + p.oc0)));
      execute(p.prim, p.scratchpad, std::move(args));
      stream().wait();
      if (s.own_swish) swish_range(yp, static_cast<int64_t>(p.dst_md.get_size() / sizeof(float)));
    });
    g_part_runs.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  dnnl::stream& st = stream();
  memory src_user(e.src_user, engine(), const_cast<void*>(x.raw()));
  memory dst_user(e.dst_user, engine(), y.raw());
  memory src = src_user, dst = dst_user;
  if (e.src_re) {
    src = memory(e.src_md, engine(), scratch(0).get(e.src_md.get_size()));
    e.src_r.run(src_user, src);
  }
  if (e.dst_re) dst = memory(e.dst_md, engine(), scratch(1).get(e.dst_md.get_size()));
  if (residual) {
    // The sum post-op adds what dst holds before the conv writes it.
    if (e.res_re) {
      memory r(e.res_user, engine(), const_cast<void*>(residual->raw()));
      e.res_r.run(r, dst);
    } else if (residual->raw() != dst.get_data_handle()) {
      std::memcpy(dst.get_data_handle(), residual->raw(), e.dst_md.get_size());
    }
  }
  memory wei;
  if (s.constant) {
    if (e.wei_re) {
      wei = s.packed_for(e.wei_md);
    } else {
      std::lock_guard<std::mutex> lock(s.mu);
      wei = memory(e.wei_user, engine(), const_cast<void*>(s.plain_locked().raw()));
    }
  } else {
    memory wu(e.wei_user, engine(), const_cast<void*>(w.raw()));
    if (e.wei_re) {
      wei = memory(e.wei_md, engine(), scratch(2).get(e.wei_md.get_size()));
      reorder(wu, wei);
    } else {
      wei = wu;
    }
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
  if (b) {
    const Tensor& bt = *b;
    args.emplace(DNNL_ARG_BIAS, memory({{bt.numel()}, memory::data_type::f32, memory::format_tag::a}, engine(),
                                       const_cast<void*>(bt.raw())));
  }
  execute(e.prim, e.scratchpad, std::move(args));
  if (e.dst_re) e.dst_r.run(dst, dst_user);
  st.wait();
  if (e.swish_pass) swish_range(y.data<float>(), y.numel());
  return true;
}

struct DnnlPool::Impl {
  Kind kind;
  struct Entry {
    bool ok = false;
    dnnl::pooling_v2_forward prim;
    memory::desc src_md, dst_md, scratchpad;
  };
  std::mutex mu;  // guards the cache (entries are shared, as in DnnlConv)
  std::map<Dims, std::shared_ptr<const Entry>> cache;
};

DnnlPool::DnnlPool(Kind kind) : impl_(std::make_unique<Impl>()) { impl_->kind = kind; }
DnnlPool::~DnnlPool() = default;

bool DnnlPool::run(const Tensor& x, const Geom& g, Tensor& y, int64_t blk, int64_t channels) {
  Impl& s = *impl_;
  std::shared_ptr<const Impl::Entry> found;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.cache.find(x.dims());
    if (it != s.cache.end()) found = it->second;
  }
  if (!found) {
    auto made = std::make_shared<Impl::Entry>();
    Impl::Entry& e = *made;
    Dims pr = effective_end_pad(g, false);
    bool ok = true;
    for (size_t i = 0; i < pr.size(); ++i) {
      // Ceil mode pads the end further; counting those pads would differ from ONNX.
      if (pr[i] > g.pe[i] && s.kind == Kind::AvgIncludePad) ok = false;
      pr[i] = std::max(pr[i], g.pe[i]);
    }
    try {
      if (!ok) throw dnnl::error(dnnl_unimplemented, "ceil mode with count_include_pad");
      auto alg = s.kind == Kind::Max             ? dnnl::algorithm::pooling_max
                 : s.kind == Kind::AvgIncludePad ? dnnl::algorithm::pooling_avg_include_padding
                                                 : dnnl::algorithm::pooling_avg_exclude_padding;
      e.src_md = blk ? blocked_desc(logical_dims(x.dims(), channels), blk) : plain_desc(x.dims());
      e.dst_md = blk ? blocked_desc(logical_dims(y.dims(), channels), blk) : plain_desc(y.dims());
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, e.src_md, e.dst_md, mdims(g.stride),
                                       mdims(g.k), mdims(minus_one(g.dil)), mdims(g.pb), mdims(pr));
      dnnl::pooling_v2_forward::primitive_desc pd(d, user_scratchpad(), engine());
      e.prim = dnnl::pooling_v2_forward(pd);
      e.scratchpad = pd.scratchpad_desc();
      e.ok = true;
    } catch (const dnnl::error&) {
      e.ok = false;
    }
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.cache.size() >= 16) s.cache.clear();
    found = s.cache.emplace(x.dims(), std::move(made)).first->second;
  }
  const Impl::Entry& e = *found;
  if (!e.ok) return false;
  memory src(e.src_md, engine(), const_cast<void*>(x.raw()));
  memory dst(e.dst_md, engine(), y.raw());
  execute(e.prim, e.scratchpad, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  stream().wait();
  return true;
}

}  // namespace t2o::kern
