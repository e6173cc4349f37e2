// Remaining ops: NonMaxSuppression, StringNormalizer, TfIdfVectorizer.
// Random generators live in misc_random.cpp, optimizer ops in training.cpp.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/kernels/util.h"

namespace t2o {

void register_random_kernels(KernelRegistry& r);
void register_training_kernels(KernelRegistry& r);

namespace {

// ---- NonMaxSuppression ---------------------------------------------------------------------

struct Box {
  double y1, x1, y2, x2;
};

double iou(const Box& a, const Box& b) {
  double ix1 = std::max(a.x1, b.x1), iy1 = std::max(a.y1, b.y1);
  double ix2 = std::min(a.x2, b.x2), iy2 = std::min(a.y2, b.y2);
  if (ix2 <= ix1 || iy2 <= iy1) return 0.0;
  double inter = (ix2 - ix1) * (iy2 - iy1);
  double area_a = (a.x2 - a.x1) * (a.y2 - a.y1), area_b = (b.x2 - b.x1) * (b.y2 - b.y1);
  double uni = area_a + area_b - inter;
  return uni <= 0 ? 0.0 : inter / uni;
}

void non_max_suppression(KernelContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4) ctx.fail("boxes must have shape [batch, boxes, 4], got " + dims_to_string(boxes.dims()));
  if (scores.rank() != 3) ctx.fail("scores must have shape [batch, classes, boxes], got " + dims_to_string(scores.dims()));
  int64_t batch = boxes.dim(0), n = boxes.dim(1), classes = scores.dim(1);
  if (scores.dim(0) != batch || scores.dim(2) != n)
    ctx.fail("scores shape " + dims_to_string(scores.dims()) + " does not match boxes " + dims_to_string(boxes.dims()));
  int64_t max_out = 0;
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) max_out = ctx.input(2).as_int(0);
  double iou_th = ctx.has_input(3) && ctx.input(3).numel() > 0 ? ctx.input(3).as_double(0) : 0.0;
  bool has_score_th = ctx.has_input(4) && ctx.input(4).numel() > 0;
  double score_th = has_score_th ? ctx.input(4).as_double(0) : 0.0;
  if (iou_th < 0 || iou_th > 1) ctx.fail("iou_threshold must be in [0, 1]");
  bool center = ctx.node().attr_int("center_point_box", 0) != 0;
  std::vector<Box> bx(static_cast<size_t>(batch * n));
  for (int64_t i = 0; i < batch * n; ++i) {
    double a = boxes.as_double(i * 4), b = boxes.as_double(i * 4 + 1), c = boxes.as_double(i * 4 + 2),
           d = boxes.as_double(i * 4 + 3);
    Box& o = bx[static_cast<size_t>(i)];
    if (center) o = {b - d / 2, a - c / 2, b + d / 2, a + c / 2};  // [x_center, y_center, w, h]
    else o = {std::min(a, c), std::min(b, d), std::max(a, c), std::max(b, d)};
  }
  std::vector<int64_t> sel;
  std::vector<int64_t> order;
  std::vector<double> sc(static_cast<size_t>(n));
  for (int64_t b = 0; b < batch && max_out > 0; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      int64_t base = (b * classes + c) * n;
      order.clear();
      for (int64_t i = 0; i < n; ++i) {
        sc[static_cast<size_t>(i)] = scores.as_double(base + i);
        if (!has_score_th || sc[static_cast<size_t>(i)] > score_th) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t x, int64_t y) { return sc[static_cast<size_t>(x)] > sc[static_cast<size_t>(y)]; });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        const Box& cand = bx[static_cast<size_t>(b * n + i)];
        bool ok = true;
        for (int64_t k : kept)
          if (iou(cand, bx[static_cast<size_t>(b * n + k)]) > iou_th) {
            ok = false;
            break;
          }
        if (ok) kept.push_back(i);
      }
      for (int64_t k : kept) sel.insert(sel.end(), {b, c, k});
    }
  Tensor& out = ctx.allocate_output(0, DType::Int64, {static_cast<int64_t>(sel.size() / 3), 3});
  std::copy(sel.begin(), sel.end(), out.data<int64_t>());
}

// ---- StringNormalizer ----------------------------------------------------------------------

std::string ascii_case(std::string s, bool upper) {
  for (char& ch : s) {
    unsigned char u = static_cast<unsigned char>(ch);
    ch = static_cast<char>(upper ? std::toupper(u) : std::tolower(u));
  }
  return s;
}

// Case changes are ASCII-only: multi-byte UTF-8 sequences pass through unchanged.
class StringNormalizerKernel : public OpKernel {
 public:
  explicit StringNormalizerKernel(const KernelInfo& info) {
    const Node& n = info.node;
    std::string action = n.attr_string("case_change_action", "NONE");
    if (action == "LOWER") action_ = 1;
    else if (action == "UPPER") action_ = 2;
    else if (action != "NONE") throw Error(n.describe() + ": unknown case_change_action '" + action + "'");
    sensitive_ = n.attr_int("is_case_sensitive", 0) != 0;
    for (const std::string& w : n.attr_strings("stopwords")) stop_.insert(sensitive_ ? w : ascii_case(w, false));
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::String) ctx.fail("input must be a string tensor");
    bool two_d = x.rank() == 2;
    if (!(x.rank() == 1 || (two_d && x.dim(0) == 1)))
      ctx.fail("input must have shape [C] or [1, C], got " + dims_to_string(x.dims()));
    std::vector<std::string> kept;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const std::string& s = x.strings()[i];
      if (stop_.count(sensitive_ ? s : ascii_case(s, false))) continue;
      kept.push_back(action_ == 0 ? s : ascii_case(s, action_ == 2));
    }
    if (kept.empty()) kept.push_back("");
    int64_t c = static_cast<int64_t>(kept.size());
    ctx.set_output(0, RValue(Tensor::from_strings(kept, two_d ? Dims{1, c} : Dims{c})));
  }

 private:
  int action_ = 0;
  bool sensitive_ = false;
  std::set<std::string> stop_;
};

// ---- TfIdfVectorizer -----------------------------------------------------------------------

class TfIdfKernel : public OpKernel {
 public:
  explicit TfIdfKernel(const KernelInfo& info) {
    const Node& n = info.node;
    min_n_ = n.attr_int("min_gram_length", 1);
    max_n_ = n.attr_int("max_gram_length", 1);
    max_skip_ = n.attr_int("max_skip_count", 0);
    std::string mode = n.attr_string("mode", "TF");
    mode_ = mode == "TF" ? 0 : mode == "IDF" ? 1 : mode == "TFIDF" ? 2 : -1;
    if (mode_ < 0) throw Error(n.describe() + ": unknown mode '" + mode + "'");
    if (min_n_ < 1 || max_n_ < min_n_ || max_skip_ < 0) throw Error(n.describe() + ": invalid gram lengths or skip count");
    std::vector<int64_t> counts = n.attr_ints("ngram_counts"), indexes = n.attr_ints("ngram_indexes");
    weights_ = n.attr_floats("weights");
    std::vector<int64_t> pool_i = n.attr_ints("pool_int64s");
    std::vector<std::string> pool_s = n.attr_strings("pool_strings");
    strings_ = !pool_s.empty();
    int64_t pool_size = strings_ ? static_cast<int64_t>(pool_s.size()) : static_cast<int64_t>(pool_i.size());
    // Token ids: strings map to dense ids so n-grams of either kind become int64 keys.
    auto token = [&](int64_t p) -> int64_t {
      if (!strings_) return pool_i[static_cast<size_t>(p)];
      auto it = vocab_.emplace(pool_s[static_cast<size_t>(p)], static_cast<int64_t>(vocab_.size())).first;
      return it->second;
    };
    int64_t k = 0;
    for (size_t g = 0; g < counts.size(); ++g) {
      int64_t len = static_cast<int64_t>(g) + 1;
      int64_t start = counts[g], end = g + 1 < counts.size() ? counts[g + 1] : pool_size;
      if (start < 0 || end > pool_size || start > end || (end - start) % len != 0)
        throw Error(n.describe() + ": ngram_counts do not fit the pool");
      for (int64_t p = start; p < end; p += len, ++k) {
        std::vector<int64_t> key;
        for (int64_t j = 0; j < len; ++j) key.push_back(token(p + j));
        if (k >= static_cast<int64_t>(indexes.size())) throw Error(n.describe() + ": fewer ngram_indexes than n-grams");
        grams_[key] = indexes[static_cast<size_t>(k)];
      }
    }
    // Indexes address the output row: a negative one would write before it, and the row is
    // allocated per input row, so its length stays addressable.
    for (int64_t i : indexes) {
      if (i < 0 || i >= (int64_t{1} << 40)) throw Error(n.describe() + ": ngram_indexes value " + std::to_string(i) + " is out of range");
      out_size_ = std::max(out_size_, i + 1);
    }
    if (max_n_ > (int64_t{1} << 20) || max_skip_ > (int64_t{1} << 20))
      throw Error(n.describe() + ": gram lengths and skip count must be below 2^20");
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 1 && x.rank() != 2) ctx.fail("input must have rank 1 or 2");
    if (strings_ != (x.dtype() == DType::String)) ctx.fail("input type does not match the pool type");
    if (!strings_ && x.dtype() != DType::Int32 && x.dtype() != DType::Int64) ctx.fail("input must be int32, int64 or string");
    int64_t rows = x.rank() == 2 ? x.dim(0) : 1, cols = x.dim(-1);
    std::vector<int64_t> ids(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (strings_) {
        auto it = vocab_.find(x.strings()[i]);
        ids[static_cast<size_t>(i)] = it == vocab_.end() ? -1 : it->second;
      } else {
        ids[static_cast<size_t>(i)] = x.as_int(i);
      }
    }
    Tensor& out = ctx.allocate_output(0, DType::Float, x.rank() == 2 ? Dims{rows, out_size_} : Dims{out_size_});
    float* o = out.data<float>();
    std::fill(o, o + out.numel(), 0.f);
    std::vector<int64_t> key;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t* row = ids.data() + r * cols;
      float* orow = o + r * out_size_;
      for (int64_t i = 0; i < cols; ++i)
        for (int64_t len = min_n_; len <= max_n_; ++len)
          // A unigram is the same at every skip distance: count it once.
          for (int64_t skip = 0; skip <= (len == 1 ? 0 : max_skip_); ++skip) {
            int64_t last = i + (len - 1) * (skip + 1);
            if (last >= cols) break;
            key.clear();
            for (int64_t j = 0; j < len; ++j) key.push_back(row[i + j * (skip + 1)]);
            auto it = grams_.find(key);
            if (it != grams_.end()) orow[it->second] += 1.f;
          }
      for (int64_t j = 0; j < out_size_; ++j) {
        float w = static_cast<size_t>(j) < weights_.size() ? weights_[static_cast<size_t>(j)] : 1.f;
        if (mode_ == 1) orow[j] = orow[j] > 0 ? w : 0.f;
        else if (mode_ == 2) orow[j] *= w;
      }
    }
  }

 private:
  int64_t min_n_ = 1, max_n_ = 1, max_skip_ = 0, out_size_ = 0;
  int mode_ = 0;
  bool strings_ = false;
  std::vector<float> weights_;
  std::map<std::string, int64_t> vocab_;
  std::map<std::vector<int64_t>, int64_t> grams_;
};

}  // namespace

void register_misc_kernels(KernelRegistry& r) {
  r.add("", "NonMaxSuppression", 10, stateless(non_max_suppression));
  r.add("", "StringNormalizer", 10, factory_of<StringNormalizerKernel>());
  r.add("", "TfIdfVectorizer", 9, factory_of<TfIdfKernel>());
  register_random_kernels(r);
  register_training_kernels(r);
}

}  // namespace t2o
