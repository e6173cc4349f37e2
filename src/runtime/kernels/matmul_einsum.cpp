// Einsum for any equation: explicit or implicit output, ellipsis (broadcast like numpy),
// repeated labels within one operand (diagonals, traces). Each operand gets one stride per
// label (summed over repeats, 0 where broadcast); the kernel then walks output labels times
// summed labels with two odometers.
#include <algorithm>
#include <map>
#include <memory>
#include <type_traits>

#include "runtime/kernels/matmul_util.h"

namespace t2o::kern {

namespace {

constexpr int kEllBase = 52;  // label ids: a-z 0..25, A-Z 26..51, ellipsis dims from 52

int label_id(const KernelContext& ctx, char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  ctx.fail(std::string("invalid label '") + c + "' in equation");
}

// Parses one term into label ids; `ell` receives the ellipsis position (-1 when absent).
std::vector<int> parse_term(const KernelContext& ctx, const std::string& t, int& ell) {
  std::vector<int> ids;
  ell = -1;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '.') {
      if (ell >= 0 || t.compare(i, 3, "...") != 0) ctx.fail("malformed ellipsis in '" + t + "'");
      ell = static_cast<int>(ids.size());
      i += 2;
      continue;
    }
    ids.push_back(label_id(ctx, t[i]));
  }
  return ids;
}

struct Plan {
  std::vector<int> out_labels, sum_labels;
  std::map<int, int64_t> size;
  std::vector<std::map<int, int64_t>> strides;  // per operand: label -> element stride
};

Plan make_plan(const KernelContext& ctx, const std::string& eq_raw, const std::vector<const Tensor*>& ins) {
  std::string eq;
  for (char c : eq_raw)
    if (c != ' ') eq += c;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t b = 0;;) {
    size_t e = lhs.find(',', b);
    terms.push_back(lhs.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  if (terms.size() != ins.size())
    ctx.fail("equation '" + eq_raw + "' has " + std::to_string(terms.size()) + " operands but the node has " +
             std::to_string(ins.size()) + " inputs");
  Plan p;
  int max_ell = 0;
  std::vector<std::vector<int>> labels(ins.size());
  std::map<int, int> count;
  for (size_t i = 0; i < ins.size(); ++i) {
    int ell;
    std::vector<int> ids = parse_term(ctx, terms[i], ell);
    int r = ins[i]->rank();
    int ell_rank = r - static_cast<int>(ids.size());
    if (ell_rank < 0 || (ell < 0 && ell_rank != 0))
      ctx.fail("operand " + std::to_string(i) + " of rank " + std::to_string(r) + " does not match term '" + terms[i] + "'");
    max_ell = std::max(max_ell, ell_rank);
    std::vector<int> full;
    for (int j = 0; j < static_cast<int>(ids.size()); ++j) {
      if (j == ell)
        for (int k = 0; k < ell_rank; ++k) full.push_back(-1 - (ell_rank - k));  // resolved below
      full.push_back(ids[static_cast<size_t>(j)]);
    }
    if (ell == static_cast<int>(ids.size()))
      for (int k = 0; k < ell_rank; ++k) full.push_back(-1 - (ell_rank - k));
    labels[i] = full;
    for (int id : ids) ++count[id];
  }
  // Ellipsis dims align from the right: the k-th from last is label kEllBase + max_ell - k.
  p.strides.resize(ins.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    Dims st = strides_of(ins[i]->dims());
    for (size_t d = 0; d < labels[i].size(); ++d) {
      int id = labels[i][d];
      if (id < 0) id = kEllBase + max_ell + (id + 1);
      int64_t n = ins[i]->dims()[d];
      auto it = p.size.find(id);
      if (it == p.size.end() || it->second == 1) p.size[id] = n;
      else if (n != it->second && n != 1)
        ctx.fail("label sizes disagree: " + std::to_string(n) + " vs " + std::to_string(it->second));
      if (n != 1) p.strides[i][id] += st[d];
      else p.strides[i][id] += 0;
    }
  }
  if (arrow != std::string::npos) {
    int ell;
    std::vector<int> ids = parse_term(ctx, eq.substr(arrow + 2), ell);
    for (int j = 0; j <= static_cast<int>(ids.size()); ++j) {
      if (j == ell)
        for (int k = 0; k < max_ell; ++k) p.out_labels.push_back(kEllBase + k);
      if (j < static_cast<int>(ids.size())) {
        int id = ids[static_cast<size_t>(j)];
        if (!p.size.count(id)) ctx.fail("output label is not in any input");
        if (std::count(p.out_labels.begin(), p.out_labels.end(), id)) ctx.fail("output label repeated");
        p.out_labels.push_back(id);
      }
    }
    if (ell < 0 && max_ell > 0)
      for (int k = 0; k < max_ell; ++k) p.sum_labels.push_back(kEllBase + k);  // summed away
  } else {
    for (int k = 0; k < max_ell; ++k) p.out_labels.push_back(kEllBase + k);
    // Implicit output: labels seen once, in character order (uppercase sorts first, as numpy).
    std::vector<std::pair<char, int>> once;
    for (auto [id, c] : count)
      if (c == 1) once.push_back({id < 26 ? static_cast<char>('a' + id) : static_cast<char>('A' + id - 26), id});
    std::sort(once.begin(), once.end());
    for (auto& o : once) p.out_labels.push_back(o.second);
  }
  for (auto& [id, n] : p.size)
    if (!std::count(p.out_labels.begin(), p.out_labels.end(), id) &&
        !std::count(p.sum_labels.begin(), p.sum_labels.end(), id))
      p.sum_labels.push_back(id);
  return p;
}

template <typename T>
void einsum_run(const Plan& p, const std::vector<const Tensor*>& ins, Tensor& y) {
  using Acc = std::conditional_t<std::is_integral_v<T>, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>, double>;
  size_t k = ins.size();
  auto dims_of = [&](const std::vector<int>& ls) {
    Dims d;
    for (int l : ls) d.push_back(p.size.at(l));
    return d;
  };
  auto strides_for = [&](const std::vector<int>& ls) {
    std::vector<Dims> s(k);
    for (size_t i = 0; i < k; ++i)
      for (int l : ls) {
        auto it = p.strides[i].find(l);
        s[i].push_back(it == p.strides[i].end() ? 0 : it->second);
      }
    return s;
  };
  Dims od = dims_of(p.out_labels), sd = dims_of(p.sum_labels);
  std::vector<Dims> os = strides_for(p.out_labels), ss = strides_for(p.sum_labels);
  std::vector<const T*> ptr(k);
  for (size_t i = 0; i < k; ++i) ptr[i] = ins[i]->data<T>();
  T* yp = y.data<T>();
  int64_t n_sum = numel_of(sd);
  auto body = [&](int64_t oi, const int64_t* ooff) {
    Acc acc{};
    if (n_sum > 0) {
      auto inner = [&](int64_t, const int64_t* soff) {
        Acc v = Acc(1);
        for (size_t i = 0; i < k; ++i) v *= static_cast<Acc>(ptr[i][ooff[i] + soff[i]]);
        acc += v;
      };
      if (sd.empty()) {
        std::vector<int64_t> zero(k, 0);
        inner(0, zero.data());
      } else {
        for_each_broadcast(sd, ss, inner);
      }
    }
    if constexpr (std::is_integral_v<T> || std::is_same_v<T, double>) yp[oi] = static_cast<T>(acc);
    else yp[oi] = static_cast<T>(static_cast<float>(acc));
  };
  if (od.empty()) {
    std::vector<int64_t> zero(k, 0);
    body(0, zero.data());
  } else {
    for_each_broadcast(od, os, body);
  }
}

// Gathers t (strides per label) into a contiguous buffer ordered by `order`.
std::vector<float> gather(const Plan& p, const float* t, const std::map<int, int64_t>& strides,
                          const std::vector<int>& order) {
  Dims d, st;
  for (int l : order) {
    d.push_back(p.size.at(l));
    st.push_back(strides.at(l));
  }
  std::vector<float> out(static_cast<size_t>(numel_of(d)));
  if (d.empty()) out[0] = t[0];
  else for_each_broadcast(d, {st}, [&](int64_t i, const int64_t* o) { out[static_cast<size_t>(i)] = t[o[0]]; });
  return out;
}

// Two float operands without diagonals, broadcasting or one-sided sums become one batched matmul:
// labels split into batch (both inputs and output), M (A and output), N (B and output), K (summed).
bool einsum_fast(DnnlMatmul& mm, const Plan& p, const std::vector<const Tensor*>& ins, Tensor& y) {
  if (ins.size() != 2 || y.dtype() != DType::Float) return false;
  for (size_t i = 0; i < 2; ++i) {
    if (static_cast<int>(p.strides[i].size()) != ins[i]->rank()) return false;  // a repeated label
    for (auto& [l, st] : p.strides[i])
      if (st == 0 && p.size.at(l) != 1) return false;  // broadcast
  }
  auto in_out = [&](int l) { return std::count(p.out_labels.begin(), p.out_labels.end(), l) > 0; };
  std::vector<int> batch, ml, nl, kl;
  for (int l : p.out_labels) {
    bool a = p.strides[0].count(l), b = p.strides[1].count(l);
    (a && b ? batch : a ? ml : nl).push_back(l);
  }
  for (auto& [l, st] : p.strides[0])
    if (!in_out(l)) {
      if (!p.strides[1].count(l)) return false;
      kl.push_back(l);
    }
  for (auto& [l, st] : p.strides[1])
    if (!in_out(l) && !p.strides[0].count(l)) return false;
  auto prod = [&](const std::vector<int>& ls) {
    int64_t n = 1;
    for (int l : ls) n *= p.size.at(l);
    return n;
  };
  int64_t B = prod(batch), M = prod(ml), N = prod(nl), K = prod(kl);
  if (B * M * N * K == 0) return false;
  std::vector<int> ao = batch, bo = batch, co = batch;
  ao.insert(ao.end(), ml.begin(), ml.end());
  ao.insert(ao.end(), kl.begin(), kl.end());
  bo.insert(bo.end(), kl.begin(), kl.end());
  bo.insert(bo.end(), nl.begin(), nl.end());
  co.insert(co.end(), ml.begin(), ml.end());
  co.insert(co.end(), nl.begin(), nl.end());
  std::vector<float> a = gather(p, ins[0]->data<float>(), p.strides[0], ao);
  std::vector<float> b = gather(p, ins[1]->data<float>(), p.strides[1], bo);
  std::vector<float> c(static_cast<size_t>(B * M * N));
  if (!dnnl_matmul_run(mm, B, B, M, K, N, a.data(), b.data(), nullptr, 0.0f, c.data())) return false;
  // c is laid out as co; scatter into the output's label order.
  std::map<int, int64_t> cst;
  Dims cd;
  for (int l : co) cd.push_back(p.size.at(l));
  Dims cs = strides_of(cd);
  for (size_t i = 0; i < co.size(); ++i) cst[co[i]] = cs[i];
  std::vector<float> r = gather(p, c.data(), cst, p.out_labels);
  std::copy(r.begin(), r.end(), y.data<float>());
  return true;
}

class EinsumKernel : public OpKernel {
 public:
  explicit EinsumKernel(const KernelInfo& info) {
    eq_ = info.node.attr_string("equation", "");
    if (info.fast_paths) mm_ = dnnl_matmul_make(false, false, 1.0f, nullptr);
  }
  void run(KernelContext& ctx) override {
    if (eq_.empty()) ctx.fail("missing attribute 'equation'");
    std::vector<const Tensor*> ins;
    for (int i = 0; i < ctx.num_inputs(); ++i) ins.push_back(&ctx.input(i));
    if (ins.empty()) ctx.fail("needs at least one input");
    for (const Tensor* t : ins)
      if (t->dtype() != ins[0]->dtype()) ctx.fail("inputs have different element types");
    Plan p = make_plan(ctx, eq_, ins);
    Dims od;
    for (int l : p.out_labels) od.push_back(p.size.at(l));
    Tensor& y = ctx.allocate_output(0, ins[0]->dtype(), od);
    if (y.numel() == 0) return;
    if (mm_ && einsum_fast(*mm_, p, ins, y)) return;
    dispatch_dtype(y.dtype(), [&](auto t) {
      using T = decltype(t);
      if constexpr (std::is_same_v<T, bool>) ctx.fail("does not support bool");
      else einsum_run<T>(p, ins, y);
    });
  }

 private:
  std::string eq_;
  std::shared_ptr<DnnlMatmul> mm_;
};

}  // namespace

void register_einsum_kernels(KernelRegistry& r) { r.add("", "Einsum", 12, factory_of<EinsumKernel>()); }

}  // namespace t2o::kern
