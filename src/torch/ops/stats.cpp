// Statistics: variance / standard deviation (with the mean), extrema pairs, counts, NaN-skipping
// sums, histograms, and bucketing against sorted boundaries.
#include <algorithm>
#include <cstring>

#include "torch/ops/compose.h"

namespace t2o {
namespace {

// The reduction dims of a `dim` argument (None, absent or [] means all); normalised, sorted.
std::vector<int64_t> reduce_dims(Ctx& c, const TNode* n, int r) {
  auto k = Ctx::arg_index(n, "dim");
  if (!k || c.is_none(n, *k)) return {};
  std::vector<int64_t> d = c.ints(n, *k);
  for (auto& v : d) v = norm_axis(v, std::max(r, 1));
  std::sort(d.begin(), d.end());
  return d;
}

// aten::var / std / var_mean / std_mean in all overloads: (x, unbiased), (x, dim, unbiased, keepdim),
// (x, dim, *, correction, keepdim). The count divided by comes from the sizes, so dynamic dims work.
void moments(Ctx& c, const TNode* n, bool is_std, bool with_mean) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  std::string x = c.t_as(n, 0, t);
  if (r == 0) x = c.b.reshape(x, {1});
  std::vector<int64_t> axes = reduce_dims(c, n, r);
  bool keep = c.flag(n, "keepdim", false) && r > 0;
  double correction = c.flag(n, "unbiased", true) ? 1.0 : 0.0;
  if (Ctx::arg_index(n, "correction")) correction = c.f(n, "correction", 1.0);
  std::string mean_k = c.b.reduce("ReduceMean", x, axes, true);
  std::string d = c.b.op1("Sub", {x, mean_k});
  std::string ss = c.b.reduce("ReduceSum", c.b.op1("Mul", {d, d}), axes, keep);
  auto shape = c.shape(n, 0);
  int64_t count = 1;
  for (size_t a = 0; a < shape.size(); ++a)
    if (axes.empty() || std::count(axes.begin(), axes.end(), static_cast<int64_t>(a)))
      count = shape[a] < 0 || count < 0 ? -1 : count * shape[a];
  std::string divisor;
  if (count >= 0) {
    divisor = c.b.scalar(std::max(0.0, static_cast<double>(count) - correction), t);
  } else {
    std::string cnt = c.b.op1("Div", {c.b.op1("Size", {x}), c.b.op1("Size", {mean_k})});
    divisor = c.b.op1("Max", {c.b.op1("Sub", {c.b.cast(cnt, t), c.b.scalar(correction, t)}), c.b.scalar(0, t)});
  }
  std::string v = c.b.op1("Div", {ss, divisor});
  c.out(n, 0, is_std ? c.b.op1("Sqrt", {v}) : v);
  if (!with_mean) return;
  if (keep) return c.out(n, 1, mean_k);
  c.out(n, 1, axes.empty() ? c.b.reshape(mean_k, {}) : c.b.squeeze(mean_k, axes));
}
void var(Ctx& c, const TNode* n) { moments(c, n, false, false); }
void std_(Ctx& c, const TNode* n) { moments(c, n, true, false); }
void var_mean(Ctx& c, const TNode* n) { moments(c, n, false, true); }
void std_mean(Ctx& c, const TNode* n) { moments(c, n, true, true); }

// aten::aminmax(x, *, dim=None, keepdim=False) -> (min, max)
void aminmax(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  std::vector<int64_t> axes;
  if (auto k = Ctx::arg_index(n, "dim"); k && !c.is_none(n, *k)) axes = {norm_axis(c.i(n, *k), std::max(r, 1))};
  bool keep = c.flag(n, "keepdim", false);
  std::string x = c.t(n, 0);
  if (r == 0) return c.out(n, 0, x), c.out(n, 1, x);
  c.out(n, 0, c.b.reduce("ReduceMin", x, axes, keep));
  c.out(n, 1, c.b.reduce("ReduceMax", x, axes, keep));
}

// aten::count_nonzero(x, dim: int? | int[]) -> int64
void count_nonzero(Ctx& c, const TNode* n) {
  int r = c.rank(n, 0);
  DType t = c.dtype(n, 0);
  std::string x = c.t(n, 0);
  std::string nz = c.b.op1("Not", {equal_to(c, x, c.b.scalar(0, t), t)});
  std::string y = c.b.cast(nz, DType::Int64);
  if (r == 0) return c.out(n, y);
  c.out(n, c.b.reduce("ReduceSum", y, reduce_dims(c, n, r), false));
}

// aten::nansum / nanmean(x, dim, keepdim, dtype): NaNs count as 0 and, for the mean, not at all.
void nan_reduce(Ctx& c, const TNode* n, bool mean) {
  DType t = c.out_dtype(n);
  int r = c.rank(n, 0);
  std::string x = c.t_as(n, 0, t);
  if (r == 0) x = c.b.reshape(x, {1});
  std::vector<int64_t> axes = reduce_dims(c, n, r);
  bool keep = c.flag(n, "keepdim", false) && r > 0;
  if (!dtype_is_float(t)) return c.out(n, c.b.reduce(mean ? "ReduceMean" : "ReduceSum", x, axes, keep));
  std::string isnan = c.b.op1("IsNaN", {x});
  std::string s = c.b.reduce("ReduceSum", c.b.op1("Where", {isnan, c.b.scalar(0, t), x}), axes, keep);
  if (!mean) return c.out(n, s);
  std::string cnt = c.b.reduce("ReduceSum", c.b.cast(c.b.op1("Not", {isnan}), t), axes, keep);
  c.out(n, c.b.op1("Div", {s, cnt}));
}
void nansum(Ctx& c, const TNode* n) { nan_reduce(c, n, false); }
void nanmean(Ctx& c, const TNode* n) { nan_reduce(c, n, true); }

// aten::histc(x, bins, min, max): equal-width bins over [min, max] (the data's range when min == max,
// widened by 1 on each side when that is one value); values outside are not counted, and max falls
// into the last bin. The bin is (x - lo) * bins / (hi - lo) truncated, computed as torch does.
void histc(Ctx& c, const TNode* n) {
  DType t = c.out_dtype(n);
  if (!dtype_is_float(t)) throw UnsupportedError("aten::histc on an integer tensor");
  int64_t bins = c.i(n, "bins", 100);
  double lo_v = c.f(n, "min", 0), hi_v = c.f(n, "max", 0);
  std::string x = c.b.reshape(c.t_as(n, 0, t), {-1});
  std::string lo, hi;
  if (lo_v == hi_v) {
    lo = c.b.reduce("ReduceMin", x, {}, false);
    hi = c.b.reduce("ReduceMax", x, {}, false);
    std::string same = equal_to(c, lo, hi, t);
    lo = c.b.op1("Where", {same, c.b.op1("Sub", {lo, c.b.scalar(1, t)}), lo});
    hi = c.b.op1("Where", {same, c.b.op1("Add", {hi, c.b.scalar(1, t)}), hi});
  } else {
    lo = c.b.scalar(lo_v, t);
    hi = c.b.scalar(hi_v, t);
  }
  std::string inside = c.b.op1("Not", {c.b.op1("Or", {c.b.op1("Less", {x, lo}), c.b.op1("Greater", {x, hi})})});
  std::string pos = c.b.op1("Div", {c.b.op1("Mul", {c.b.op1("Sub", {x, lo}), c.b.scalar(static_cast<double>(bins), t)}),
                                    c.b.op1("Sub", {hi, lo})});
  pos = c.b.op1("Min", {c.b.cast(c.b.op1("Floor", {pos}), DType::Int64), c.b.i64(bins - 1)});
  pos = c.b.op1("Where", {inside, pos, c.b.i64(0)});
  std::string ones = c.b.cast(inside, t);
  if (c.b.opset() >= 16) {
    Tensor z(t, {bins});
    std::memset(z.raw(), 0, z.nbytes());
    return c.out(n, c.b.op1("ScatterElements", {c.b.constant(z, "zeros"), pos, ones},
                            {Attribute::make_int("axis", 0), Attribute::make_string("reduction", "add")}));
  }
  // Before ScatterElements' reduction: compare every value with every bin.
  std::string hot = c.b.op1("Equal", {c.b.unsqueeze(pos, {1}), c.b.unsqueeze(arange_of(c, c.b.i64(bins)), {0})});
  std::string hit = c.b.op1("Where", {hot, c.b.unsqueeze(ones, {1}), c.b.scalar(0, t)});
  c.out(n, c.b.reduce("ReduceSum", hit, {0}, false));
}

// How many boundaries lie below each value (at or below with right=True): bucketize(x, boundaries)
// and searchsorted(sorted, x, side, sorter), with 1-D boundaries or one sorted row per leading index.
// For sorted boundaries that count is the insertion index.
std::string count_below(Ctx& c, const std::string& sorted, int sorted_rank, const std::string& values, int values_rank,
                        bool right, DType t) {
  std::string v = c.b.unsqueeze(values, {values_rank});  // [..., K, 1]
  std::string s = sorted_rank == 1 ? sorted : c.b.unsqueeze(sorted, {sorted_rank - 1});  // [..., 1, M]
  std::string hit = right ? c.b.op1("Not", {c.b.op1("Less", {v, s})}) : c.b.op1("Less", {s, v});
  (void)t;
  return c.b.reduce("ReduceSum", c.b.cast(hit, DType::Int64), {values_rank}, false);
}

void bucketize(Ctx& c, const TNode* n) {
  DType out = c.out_dtype(n);
  DType t = promote_dtypes(c.dtype(n, 0), c.dtype(n, 1));
  int vr = c.rank(n, 0);
  std::string v = c.t_as(n, 0, t);
  if (vr == 0) v = c.b.reshape(v, {1});
  std::string y = count_below(c, c.t_as(n, 1, t), 1, v, std::max(vr, 1), c.flag(n, "right", false), t);
  if (vr == 0) y = c.b.reshape(y, {});
  c.out(n, out == DType::Int64 ? y : c.b.cast(y, out));
}

void searchsorted(Ctx& c, const TNode* n) {
  DType out = c.out_dtype(n);
  DType t = promote_dtypes(c.dtype(n, 0), c.dtype(n, 1));
  int sr = c.rank(n, 0), vr = c.rank(n, 1);
  bool right = c.flag(n, "right", false);
  if (auto k = Ctx::arg_index(n, "side"); k && !c.is_none(n, *k)) right = c.str(n, *k) == "right";
  // A sorter only reorders the boundaries, and how many lie below a value does not depend on their order.
  std::string s = c.t_as(n, 0, t);
  std::string v = c.t_as(n, 1, t);
  if (vr == 0) v = c.b.reshape(v, {1});
  std::string y = count_below(c, s, sr, v, std::max(vr, 1), right, t);
  if (vr == 0) y = c.b.reshape(y, {});
  c.out(n, out == DType::Int64 ? y : c.b.cast(y, out));
}

}  // namespace

void register_stats_ops(OpTable& t) {
  t["aten::var"] = {var};
  t["aten::std"] = {std_};
  t["aten::var_mean"] = {var_mean};
  t["aten::std_mean"] = {std_mean};
  t["aten::aminmax"] = {aminmax};
  t["aten::count_nonzero"] = {count_nonzero};
  t["aten::nansum"] = {nansum};
  t["aten::nanmean"] = {nanmean};
  t["aten::histc"] = {histc};
  t["aten::bucketize"] = {bucketize};
  t["aten::searchsorted"] = {searchsorted};
}

}  // namespace t2o
