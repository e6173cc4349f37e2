// Transpose and the ops that are transposes of a reshaped view (DepthToSpace, SpaceToDepth).
// Transpose is on the hot path of transformer and CNN graphs: the fast path drops unit axes,
// merges axes that stay adjacent, then copies contiguous runs (last axis kept) or 2-D tiles.
#include <numeric>

#include "runtime/kernels/shape_util.h"

namespace t2o {
namespace kern {
namespace {

template <typename T>
void transpose_ref(const T* s, T* d, const Dims& in_dims, const std::vector<int64_t>& perm) {
  size_t r = in_dims.size();
  Dims is = strides_of(in_dims);
  Dims od(r), st(r);
  for (size_t i = 0; i < r; ++i) {
    od[i] = in_dims[static_cast<size_t>(perm[i])];
    st[i] = is[static_cast<size_t>(perm[i])];
  }
  for_each_broadcast(od, {st}, [&](int64_t i, const int64_t* off) { d[i] = s[off[0]]; });
}

// Drops unit axes and merges runs of output axes that read consecutive input axes.
void simplify(const Dims& in_dims, const std::vector<int64_t>& perm, Dims& md, std::vector<int64_t>& mp) {
  std::vector<int64_t> kept;  // perm restricted to non-unit axes
  for (int64_t p : perm)
    if (in_dims[static_cast<size_t>(p)] != 1) kept.push_back(p);
  std::vector<std::vector<int64_t>> groups;  // in output order; each a run of input axes
  for (int64_t p : kept) {
    if (!groups.empty()) {
      // Consecutive among non-unit axes counts: unit axes in between do not break contiguity.
      int64_t last = groups.back().back();
      bool adjacent = true;
      for (int64_t a = last + 1; a < p; ++a)
        if (in_dims[static_cast<size_t>(a)] != 1) adjacent = false;
      if (p > last && adjacent) {
        groups.back().push_back(p);
        continue;
      }
    }
    groups.push_back({p});
  }
  std::vector<size_t> order(groups.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return groups[a].front() < groups[b].front(); });
  md.assign(groups.size(), 1);
  mp.assign(groups.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) {
    const auto& g = groups[order[k]];
    for (int64_t a : g) md[k] *= in_dims[static_cast<size_t>(a)];
    mp[order[k]] = static_cast<int64_t>(k);
  }
}

template <typename T>
void transpose_fast(const T* s, T* d, const Dims& md, const std::vector<int64_t>& mp, int threads) {
  size_t n = md.size();
  int64_t total = numel_of(md);
  if (n <= 1) {
    std::memcpy(d, s, static_cast<size_t>(total) * sizeof(T));
    return;
  }
  Dims is = strides_of(md);
  Dims od(n), ist(n);
  for (size_t i = 0; i < n; ++i) {
    od[i] = md[static_cast<size_t>(mp[i])];
    ist[i] = is[static_cast<size_t>(mp[i])];
  }
  Dims os = strides_of(od);
  if (mp[n - 1] == static_cast<int64_t>(n - 1)) {
    // Last axis kept: each output row is a contiguous input run.
    int64_t run = od[n - 1], rows = total / run;
    int64_t grain = std::max<int64_t>(1, 32768 / run);
    parallel_for(rows, threads, grain, [&](int64_t b, int64_t e) {
      std::vector<int64_t> idx(n - 1);
      int64_t off = 0, rem = b;
      for (size_t k = n - 1; k-- > 0;) {
        idx[k] = rem % od[k];
        rem /= od[k];
        off += idx[k] * ist[k];
      }
      for (int64_t row = b; row < e; ++row) {
        std::memcpy(d + row * run, s + off, static_cast<size_t>(run) * sizeof(T));
        for (size_t k = n - 1; k-- > 0;) {
          off += ist[k];
          if (++idx[k] < od[k]) break;
          off -= ist[k] * od[k];
          idx[k] = 0;
        }
      }
    });
    return;
  }
  // Tiles over (q, n-1): q is the output axis reading the contiguous input axis, n-1 the
  // contiguous output axis, so both reads and writes stay within a few cache lines per tile.
  constexpr int64_t B = 16;
  size_t q = 0;
  for (size_t i = 0; i < n; ++i)
    if (mp[i] == static_cast<int64_t>(n - 1)) q = i;
  std::vector<size_t> outer;
  for (size_t i = 0; i + 1 < n; ++i)
    if (i != q) outer.push_back(i);
  int64_t outer_count = 1;
  for (size_t a : outer) outer_count *= od[a];
  int64_t dq = od[q], dl = od[n - 1], sq = os[q], sl = ist[n - 1];
  int64_t nbq = (dq + B - 1) / B;
  int64_t grain = std::max<int64_t>(1, 32768 / (B * dl));
  parallel_for(outer_count * nbq, threads, grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t oc = t / nbq, i0 = (t % nbq) * B;
      int64_t ib = 0, ob = 0, rem = oc;
      for (size_t k = outer.size(); k-- > 0;) {
        size_t a = outer[k];
        int64_t v = rem % od[a];
        rem /= od[a];
        ib += v * ist[a];
        ob += v * os[a];
      }
      int64_t i1 = std::min(dq, i0 + B);
      for (int64_t j0 = 0; j0 < dl; j0 += B) {
        int64_t j1 = std::min(dl, j0 + B);
        for (int64_t i = i0; i < i1; ++i) {
          T* dp = d + ob + i * sq;
          const T* sp = s + ib + i;
          for (int64_t j = j0; j < j1; ++j) dp[j] = sp[j * sl];
        }
      }
    }
  });
}

}  // namespace

void transpose_into(const Tensor& in, const std::vector<int64_t>& perm, Tensor& out, bool fast, int threads) {
  if (in.numel() == 0) return;
  dispatch_bits(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* s = elems<T>(in);
    T* d = elems<T>(out);
    if constexpr (std::is_same_v<T, std::string>) {
      transpose_ref(s, d, in.dims(), perm);
    } else {
      if (!fast) return transpose_ref(s, d, in.dims(), perm);
      Dims md;
      std::vector<int64_t> mp;
      simplify(in.dims(), perm, md, mp);
      transpose_fast(s, d, md, mp, threads);
    }
  });
}

namespace {

class Transpose : public OpKernel {
 public:
  explicit Transpose(const KernelInfo& info) : perm_(info.node.attr_ints("perm")), fast_(info.fast_paths) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    int64_t r = x.rank();
    std::vector<int64_t> perm = perm_;
    if (perm.empty()) {
      for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
    }
    if (static_cast<int64_t>(perm.size()) != r)
      ctx.fail("perm has " + std::to_string(perm.size()) + " entries for an input of rank " + std::to_string(r));
    std::vector<bool> seen(static_cast<size_t>(r), false);
    Dims od;
    for (int64_t& p : perm) {
      p = norm_axis(ctx, p, r);
      if (seen[static_cast<size_t>(p)]) ctx.fail("perm repeats axis " + std::to_string(p));
      seen[static_cast<size_t>(p)] = true;
      od.push_back(x.dims()[static_cast<size_t>(p)]);
    }
    Tensor& y = ctx.allocate_output_uninit(0, x.dtype(), od);
    transpose_into(x, perm, y, fast_, ctx.threads());
  }

 private:
  std::vector<int64_t> perm_;
  bool fast_;
};

// DepthToSpace (to_space) and SpaceToDepth over NCHW as a transpose of a 6-D view.
class SpaceDepth : public OpKernel {
 public:
  SpaceDepth(const KernelInfo& info, bool to_space)
      : to_space_(to_space), crd_(info.node.attr_string("mode", "DCR") == "CRD"),
        b_(info.node.attr_int("blocksize")), fast_(info.fast_paths) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 4) ctx.fail("expects a 4-D NCHW input, got " + dims_to_string(x.dims()));
    if (b_ <= 0) ctx.fail("blocksize must be positive");
    int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), b = b_;
    Dims view, od;
    std::vector<int64_t> perm;
    if (to_space_) {
      if (c % (b * b)) ctx.fail("channels " + std::to_string(c) + " are not divisible by blocksize^2");
      int64_t oc = c / (b * b);
      if (crd_) {
        view = {n, oc, b, b, h, w};
        perm = {0, 1, 4, 2, 5, 3};
      } else {
        view = {n, b, b, oc, h, w};
        perm = {0, 3, 4, 1, 5, 2};
      }
      od = {n, oc, h * b, w * b};
    } else {
      if (h % b || w % b) ctx.fail("height and width must be divisible by blocksize");
      view = {n, c, h / b, b, w / b, b};
      perm = {0, 3, 5, 1, 2, 4};
      od = {n, c * b * b, h / b, w / b};
    }
    Tensor& y = ctx.allocate_output_uninit(0, x.dtype(), od);
    transpose_into(x.reshaped(view), perm, y, fast_, ctx.threads());
  }

 private:
  bool to_space_, crd_;
  int64_t b_;
  bool fast_;
};

}  // namespace
}  // namespace kern

void register_shape_transpose_kernels(KernelRegistry& r) {
  using namespace kern;
  r.add("", "Transpose", 1, factory_of<Transpose>());
  r.add("", "DepthToSpace", 1, [](const KernelInfo& i) { return std::make_unique<SpaceDepth>(i, true); });
  r.add("", "SpaceToDepth", 1, [](const KernelInfo& i) { return std::make_unique<SpaceDepth>(i, false); });
}

}  // namespace t2o
