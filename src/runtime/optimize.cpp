// Conv + activation / residual-Add fusion (see optimize.h). Fusing saves a full pass over the
// activation per fused op and lets oneDNN apply the post-ops while the output is still in cache.
#include "runtime/optimize.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "runtime/kernels/conv_dnnl.h"
#include "runtime/kernels/int8.h"
#include "runtime/kernels/rnn_fast.h"
#include "runtime/session.h"

namespace t2o {

namespace {

bool default_domain(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// The graph's initializers by name, less those that are also graph inputs (an overridable default
// is not constant).
std::map<std::string, const Tensor*> constants_of(const Graph& g) {
  std::map<std::string, const Tensor*> c;
  for (const Initializer& i : g.initializers) c[i.name] = &i.tensor;
  for (const ValueInfo& vi : g.inputs) c.erase(vi.name);
  return c;
}

// Names a rewrite must keep: the graph's outputs, and names read inside subgraphs (a fused-away
// value would vanish from their scope).
std::set<std::string> pinned_names(const Graph& g) {
  std::set<std::string> pinned;
  for (const ValueInfo& o : g.outputs) pinned.insert(o.name);
  for (const Node& n : g.nodes)
    for (const Attribute& a : n.attributes) {
      std::vector<const Graph*> subs;
      if (a.g) subs.push_back(a.g.get());
      for (const auto& sg : a.graphs)
        if (sg) subs.push_back(sg.get());
      for (const Graph* sg : subs) {
        sg->for_each_node([&](const Node& sn) { pinned.insert(sn.inputs.begin(), sn.inputs.end()); });
        for (const ValueInfo& o : sg->outputs) pinned.insert(o.name);
      }
    }
  return pinned;
}

// Declares the internal domain the rewritten nodes use (once).
void import_internal_domain(Model& m) {
  for (const auto& o : m.opset_import)
    if (o.domain == kInternalDomain) return;
  m.opset_import.push_back({kInternalDomain, 1});
}

struct PostOp {
  std::string kind;
  float alpha = 0, beta = 0;
};

class Fuser {
 public:
  explicit Fuser(Model& m) : m_(m), g_(m.graph), pinned_(pinned_names(m.graph)) {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      for (const auto& in : n.inputs)
        if (!in.empty()) readers_[in].push_back(i);
      for (const auto& out : n.outputs) producer_[out] = i;
    }
  }

  int run() {
    int fused = 0;
    std::vector<bool>& dead = dead_;
    dead.assign(g_.nodes.size(), false);
    std::map<size_t, Node> replace;  // position of the chain's last node -> fused node
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& conv = g_.nodes[i];
      // Int8Conv takes the element-wise post-ops and a float residual sum (as its input 8).
      // (Not one whose output is quantized already: its readers see integers.)
      const bool int8 = conv.op_type == "Int8Conv" && conv.domain == kInternalDomain && !conv.has_attr("post_ops") &&
                        !conv.has_input(6);
      if (dead[i] || (conv.op_type != "Conv" && !int8) || (!int8 && !default_domain(conv)) || conv.outputs.size() != 1)
        continue;
      const Tensor* w = conv.has_input(1) ? constant(conv.inputs[1]) : nullptr;
      // Only f32 weights: X must match them, so the fused kernel runs f32 (or reports the error).
      if (!int8 && (!w || w->dtype() != DType::Float || conv.inputs.size() > 3)) continue;
      std::vector<PostOp> ops;
      std::vector<size_t> chain;
      std::string residual, cur = conv.outputs[0];
      while (true) {
        std::vector<size_t> next;
        std::optional<PostOp> op = match(cur, residual.empty(), next, residual);
        if (!op) break;
        ops.push_back(*op);
        for (size_t j : next) chain.push_back(j);
        cur = g_.nodes[next.back()].outputs[0];
      }
      if (ops.empty()) continue;
      Node f;
      f.name = conv.name;
      f.doc_string = conv.doc_string;
      f.op_type = int8 ? "Int8Conv" : "FusedConv";
      f.domain = kInternalDomain;
      f.attributes = conv.attributes;
      f.inputs = conv.inputs;
      if (!int8) f.inputs.resize(3);
      if (!residual.empty()) {
        if (int8) f.inputs.resize(8);  // R is Int8Conv's input 8
        f.inputs.push_back(residual);
      }
      f.outputs = {cur};
      std::vector<std::string> kinds;
      std::vector<float> alphas, betas;
      for (const PostOp& p : ops) kinds.push_back(p.kind), alphas.push_back(p.alpha), betas.push_back(p.beta);
      f.set_attr(Attribute::make_strings("post_ops", kinds));
      f.set_attr(Attribute::make_floats("post_alpha", alphas));
      f.set_attr(Attribute::make_floats("post_beta", betas));
      if (!int8 && drops_nan(ops) && may_be_nonfinite(f.inputs)) f.set_attr(Attribute::make_int("keep_nan", 1));
      if (!int8 && may_be_nonfinite(f.inputs)) f.set_attr(Attribute::make_int("nonfinite_in", 1));
      dead[i] = true;
      for (size_t j : chain) dead[j] = true;
      size_t last = *std::max_element(chain.begin(), chain.end());
      replace[last] = std::move(f);
      fused += static_cast<int>(chain.size());
    }
    // A MaxPool on oneDNN computes max, which skips a NaN: mark those NaN may reach, as above.
    int marked = 0;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      Node& n = g_.nodes[i];
      if (!dead[i] && n.op_type == "MaxPool" && default_domain(n) && !n.inputs.empty() &&
          !n.has_attr("keep_nan") && may_be_nonfinite({n.inputs[0]})) {
        n.set_attr(Attribute::make_int("keep_nan", 1));
        ++marked;
      }
      // A conv without post-ops: Winograd must not see a NaN or infinity (see conv_winograd.h).
      if (!dead[i] && n.op_type == "Conv" && default_domain(n) && !n.has_attr("nonfinite_in") &&
          may_be_nonfinite(n.inputs)) {
        n.set_attr(Attribute::make_int("nonfinite_in", 1));
        ++marked;
      }
    }
    return rebuild(replace, fused) + marked;
  }

  // MatMul with a constant 2-D float B, whose result only a bias Add reads (a constant vector
  // of N values), then optionally the erf GELU: FusedMatMul, one oneDNN matmul with the bias and the
  // GELU applied as it stores. An Int8MatMul takes a GELU that follows it (attribute activation).
  // Returns how many nodes were folded in.
  int fuse_matmuls() {
    int fused = 0;
    dead_.assign(g_.nodes.size(), false);
    std::map<size_t, Node> replace;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& mm = g_.nodes[i];
      // An int8 product followed by the erf GELU takes it as its activation.
      if (!dead_[i] && mm.op_type == "Int8MatMul" && mm.domain == kInternalDomain && !mm.has_attr("activation") &&
          !mm.has_input(6) && mm.outputs.size() == 1) {
        if (auto g = match_gelu(mm.outputs[0])) {
          Node f = mm;
          f.outputs = {g_.nodes[g->back()].outputs[0]};
          f.set_attr(Attribute::make_string("activation", "gelu"));
          dead_[i] = true;
          for (size_t j : *g) dead_[j] = true;
          replace[*std::max_element(g->begin(), g->end())] = std::move(f);
          fused += static_cast<int>(g->size());
        }
        continue;
      }
      if (dead_[i] || mm.op_type != "MatMul" || !default_domain(mm) || mm.inputs.size() != 2 || mm.outputs.size() != 1)
        continue;
      const Tensor* w = constant(mm.inputs[1]);
      if (!w || w->dtype() != DType::Float || w->rank() != 2) continue;
      auto ar = only_reader(mm.outputs[0]);
      if (!ar) continue;
      const Node& add = g_.nodes[*ar];
      if (add.op_type != "Add" || !default_domain(add) || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
      const std::string& other = add.inputs[0] == mm.outputs[0] ? add.inputs[1] : add.inputs[0];
      const Tensor* b = constant(other);
      // A 1-D bias only: a [1, N] one would add a dim when A is 1-D.
      if (!b || b->dtype() != DType::Float || b->rank() != 1 || b->dim(0) != w->dim(1)) continue;
      std::vector<size_t> chain{*ar};
      std::string out = add.outputs[0];
      bool gelu = false;
      if (auto g = match_gelu(out)) {
        gelu = true;
        out = g_.nodes[g->back()].outputs[0];
        chain.insert(chain.end(), g->begin(), g->end());
      }
      Node f;
      f.name = mm.name;
      f.doc_string = mm.doc_string;
      f.op_type = "FusedMatMul";
      f.domain = kInternalDomain;
      f.inputs = {mm.inputs[0], mm.inputs[1], other};
      f.outputs = {out};
      if (gelu) f.set_attr(Attribute::make_string("activation", "gelu"));
      dead_[i] = true;
      for (size_t j : chain) dead_[j] = true;
      replace[*std::max_element(chain.begin(), chain.end())] = std::move(f);
      fused += static_cast<int>(chain.size());
    }
    return rebuild(replace, fused);
  }

  // Scaled dot-product attention as PyTorch's multi-head attention exports it:
  //   S = MatMul(Transpose(q, 0 2 1 3), Transpose(k, 0 2 3 1)) [Div or Mul by a constant scalar]
  //       [Where(mask, constant scalar fill, .) or Add with a float mask]
  //   y = Transpose(MatMul(Softmax(S, last axis), Transpose(v, 0 2 1 3)), 0 2 1 3)
  // with every intermediate read once: internal::Attention(q, k, v, [mask]) -> y. Returns how many
  // nodes were folded in.
  int fuse_attention(int64_t opset) {
    int fused = 0;
    dead_.assign(g_.nodes.size(), false);
    std::map<size_t, Node> replace;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node* mm = binary(i, "MatMul");
      if (!mm) continue;
      auto tq = transpose_into(mm->inputs[0], {0, 2, 1, 3}, i);
      auto tk = transpose_into(mm->inputs[1], {0, 2, 3, 1}, i);
      if (!tq || !tk) continue;
      std::vector<size_t> chain{*tq, *tk, i};
      std::string cur = mm->outputs[0];
      auto next = only_reader(cur);
      if (!next) continue;
      float scale = 1.0f;
      bool scaled = false;
      if (const Node* d = binary(*next, "Div"); d && d->inputs[0] == cur) {
        const Tensor* c = constant(d->inputs[1]);
        if (!c || c->dtype() != DType::Float || c->numel() != 1 || c->data<float>()[0] == 0.0f) continue;
        scale = 1.0f / c->data<float>()[0];
        scaled = true;
      } else if (const Node* m = binary(*next, "Mul")) {
        const Tensor* c = constant(m->inputs[0] == cur ? m->inputs[1] : m->inputs[0]);
        if (!c || c->dtype() != DType::Float || c->numel() != 1 || m->inputs[0] == m->inputs[1]) continue;
        scale = c->data<float>()[0];
        scaled = true;
      }
      if (scaled) {
        chain.push_back(*next);
        cur = g_.nodes[*next].outputs[0];
        if (!(next = only_reader(cur))) continue;
      }
      std::string mask_kind, mask;
      float fill = 0.0f;
      const Node& mn = g_.nodes[*next];
      if (!is_dead(*next) && default_domain(mn) && mn.op_type == "Where" && mn.inputs.size() == 3 &&
          mn.outputs.size() == 1 && mn.inputs[2] == cur && mn.inputs[0] != cur && mn.inputs[1] != cur) {
        const Tensor* f = constant(mn.inputs[1]);
        if (!f || f->dtype() != DType::Float || f->numel() != 1) continue;
        mask_kind = "where", mask = mn.inputs[0], fill = f->data<float>()[0];
      } else if (const Node* a = binary(*next, "Add"); a && a->inputs[0] != a->inputs[1]) {
        mask_kind = "add", mask = a->inputs[0] == cur ? a->inputs[1] : a->inputs[0];
      }
      if (!mask_kind.empty()) {
        chain.push_back(*next);
        cur = g_.nodes[*next].outputs[0];
        if (!(next = only_reader(cur))) continue;
      }
      const Node& sm = g_.nodes[*next];
      if (is_dead(*next) || sm.op_type != "Softmax" || !default_domain(sm) || sm.outputs.size() != 1) continue;
      int64_t axis = sm.attr_int("axis", opset >= 13 ? -1 : 1);
      if (axis != -1 && axis != 3) continue;
      chain.push_back(*next);
      cur = sm.outputs[0];
      auto pv = only_reader(cur);
      const Node* mm2 = pv ? binary(*pv, "MatMul") : nullptr;
      if (!mm2 || mm2->inputs[0] != cur) continue;
      auto tv = transpose_into(mm2->inputs[1], {0, 2, 1, 3}, *pv);
      if (!tv) continue;
      chain.push_back(*tv);
      chain.push_back(*pv);
      auto to = only_reader(mm2->outputs[0]);
      if (!to || !transpose_into(mm2->outputs[0], {0, 2, 1, 3}, SIZE_MAX, *to)) continue;
      chain.push_back(*to);
      Node f;
      f.name = mm->name;
      f.doc_string = mm->doc_string;
      f.op_type = "Attention";
      f.domain = kInternalDomain;
      f.inputs = {g_.nodes[*tq].inputs[0], g_.nodes[*tk].inputs[0], g_.nodes[*tv].inputs[0]};
      if (!mask.empty()) f.inputs.push_back(mask);
      f.outputs = {g_.nodes[*to].outputs[0]};
      f.set_attr(Attribute::make_float("scale", scale));
      if (!mask_kind.empty()) f.set_attr(Attribute::make_string("mask", mask_kind));
      if (mask_kind == "where") f.set_attr(Attribute::make_float("fill", fill));
      for (size_t j : chain) dead_[j] = true;
      replace[*std::max_element(chain.begin(), chain.end())] = std::move(f);
      fused += static_cast<int>(chain.size());
    }
    return rebuild(replace, fused);
  }

  // Channel-blocked activations between convs: a conv whose output some conv reads (as X or as
  // the residual), directly or through 2-d MaxPool / AveragePool nodes, a squeeze-and-excitation
  // scale or a channel Concat, writes it blocked under a new name, and so do those pools (as
  // BlockedPool), scales (as BlockedScale) and concats (as BlockedConcat); readers that want NCHW
  // get it through a FromBlocked node under the original name. Returns how many values went
  // blocked.
  int block_layouts(int64_t blk) {
    // cand: may write its output blocked (and take a blocked residual); reads: may read X blocked;
    // pool: passes the layout of X through to its output; global: a global pool, which reads X
    // blocked and writes its plain [N, C, 1, 1] result; scale: a squeeze-and-excitation Mul,
    // which passes the layout of its input scale_x through; concat: joins blocked conv outputs.
    size_t n = g_.nodes.size();
    std::vector<bool> cand(n), reads(n), pool(n), global(n), scale(n), concat(n);
    std::vector<size_t> scale_x(n);
    for (size_t i = 0; i < n; ++i) {
      cand[i] = blockable(g_.nodes[i], blk, false);
      reads[i] = blockable(g_.nodes[i], blk, true);
      pool[i] = poolable(g_.nodes[i]);
      global[i] = global_poolable(g_.nodes[i]);
      if (auto x = se_scaled_input(g_.nodes[i], blk)) scale[i] = true, scale_x[i] = *x;
      concat[i] = block_concatenable(g_.nodes[i], blk);
    }
    // wants[i]: node i's output has a reader that takes it blocked (readers come later: go backwards).
    std::vector<bool> wants(n);
    auto takes_blocked = [&](size_t j, size_t k) {
      if (scale[j]) return k == scale_x[j] && wants[j];
      if (concat[j]) return static_cast<bool>(wants[j]);
      return k == 0 ? reads[j] || global[j] || (pool[j] && wants[j]) : k == 3 && cand[j] && !int8_conv(g_.nodes[j]);
    };
    for (size_t i = n; i-- > 0;) {
      if (!cand[i] && !pool[i] && !scale[i] && !concat[i]) continue;
      auto rit = readers_.find(g_.nodes[i].outputs[0]);
      if (rit == readers_.end()) continue;
      for (size_t j : rit->second)
        for (size_t k = 0; k < g_.nodes[j].inputs.size(); ++k)
          if (g_.nodes[j].inputs[k] == g_.nodes[i].outputs[0] && takes_blocked(j, k)) wants[i] = true;
    }
    std::map<size_t, Node> after;  // FromBlocked nodes, by producer position
    std::map<std::string, int64_t> channels;  // blocked value -> its channel count
    int count = 0;
    for (size_t i = 0; i < n; ++i) {
      Node& p = g_.nodes[i];
      if (!wants[i]) continue;
      int64_t c = 0;
      std::vector<int64_t> parts;  // a concat's input channel counts
      if (concat[i]) {
        for (const std::string& in : p.inputs) {
          auto cit = channels.find(in);
          if (cit == channels.end()) break;
          parts.push_back(cit->second);
          c += cit->second;
        }
        // Every input is a blocked conv output (block_concatenable, and wants[i] made them so).
        if (parts.size() != p.inputs.size()) throw Error("block_layouts: a concat input did not go blocked");
      } else if (pool[i] || scale[i]) {
        auto cit = channels.find(p.inputs[pool[i] ? 0 : scale_x[i]]);
        if (cit == channels.end()) continue;  // its input stays NCHW: so does it
        c = cit->second;
      } else {
        c = constant(p.inputs[1])->dim(0);
      }
      std::string v = p.outputs[0];
      auto rit = readers_.find(v);
      bool plain_reads = pinned_.count(v) > 0;
      for (size_t j : rit->second)
        for (size_t k = 0; k < g_.nodes[j].inputs.size(); ++k)
          if (g_.nodes[j].inputs[k] == v && !takes_blocked(j, k)) plain_reads = true;
      std::string bv = v + "#blocked";
      while (readers_.count(bv) || producer_.count(bv)) bv += "_";
      for (size_t j : rit->second) {
        Node& r = g_.nodes[j];
        for (size_t k = 0; k < r.inputs.size(); ++k) {
          if (r.inputs[k] != v || !takes_blocked(j, k)) continue;
          r.inputs[k] = bv;
          if (pool[j] || scale[j] || concat[j]) continue;  // marked when its turn comes
          if (global[j]) {
            as_blocked_pool(r, "BlockedGlobalPool", r.op_type == "GlobalMaxPool", blk, c);
            continue;
          }
          r.set_attr(Attribute::make_int(k == 0 ? "src_block" : "res_block", blk));
          as_fused(r);
        }
      }
      p.outputs[0] = bv;
      if (pool[i]) {
        as_blocked_pool(p, "BlockedPool", p.op_type == "MaxPool", blk, c);
      } else if (concat[i]) {
        p.attributes.clear();
        p.set_attr(Attribute::make_int("block", blk));
        p.set_attr(Attribute::make_ints("channels", parts));
        p.op_type = "BlockedConcat";
        p.domain = kInternalDomain;
      } else if (scale[i]) {
        if (scale_x[i] != 0) std::swap(p.inputs[0], p.inputs[1]);  // X first
        p.set_attr(Attribute::make_int("block", blk));
        p.set_attr(Attribute::make_int("channels", c));
        p.op_type = "BlockedScale";
        p.domain = kInternalDomain;
      } else {
        p.set_attr(Attribute::make_int("dst_block", blk));
        as_fused(p);
      }
      channels[bv] = c;
      if (plain_reads) {
        Node f;
        f.name = p.name + "/to_nchw";
        f.doc_string = p.doc_string;
        f.op_type = "FromBlocked";
        f.domain = kInternalDomain;
        f.inputs = {bv};
        f.outputs = {v};
        f.set_attr(Attribute::make_int("channels", c));
        after[i] = std::move(f);
      }
      ++count;
    }
    if (!count) return 0;
    std::vector<Node> nodes;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      nodes.push_back(std::move(g_.nodes[i]));
      if (auto it = after.find(i); it != after.end()) nodes.push_back(std::move(it->second));
    }
    g_.nodes = std::move(nodes);
    add_domain();
    return count;
  }

 private:
  // A 2-d f32 conv with constant weights: the kind whose activations may go blocked, on its
  // output side (`input` false) or its input side. oneDNN's jit kernels for blocked activations
  // need whole blocks per group (depthwise aside), and partly filled blocks only for 1x1 and
  // depthwise convs; otherwise it takes its reference kernel, far slower than the reorders that
  // blocking saves (ResNeXt's 4-channel groups, EfficientNetV2's 24-channel 3x3 convs: ~20x).
  bool blockable(const Node& n, int64_t blk, bool input) const {
    // An Int8Conv with float X (Y) quantizes from (writes into) blocks itself, any channel count.
    if (int8_conv(n)) {
      if (n.outputs.size() != 1 || n.outputs[0].empty() || blk > 16) return false;
      if (input) return !n.attr_int("src_quantized", 0) && !n.attr_int("src_nhwc", 0);
      // A residual Int8Conv's output stays plain: its sum may broadcast.
      return !n.has_input(6) && !n.has_input(8) && !n.attr_int("dst_nhwc", 0);
    }
    bool conv = (n.op_type == "Conv" && default_domain(n)) || (n.op_type == "FusedConv" && n.domain == kInternalDomain);
    if (!conv || n.outputs.size() != 1 || n.outputs[0].empty() || n.inputs.size() > 4 || !n.has_input(1)) return false;
    const Tensor* w = constant(n.inputs[1]);
    if (!w || w->dtype() != DType::Float || w->rank() != 4) return false;
    int64_t group = n.attr_int("group", 1), cout = w->dim(0), cin_g = w->dim(1);
    if (group < 1 || cout % group != 0) return false;
    bool depthwise = group > 1 && cin_g == 1 && cout == group;
    if (group > 1 && !depthwise && (cin_g % blk != 0 || (cout / group) % blk != 0)) return false;
    // Partly filled blocks (padded channels) have jit kernels for 1x1 and depthwise convs.
    bool pointwise = w->dim(2) == 1 && w->dim(3) == 1;
    return (input ? cin_g * group : cout) % blk == 0 || pointwise || depthwise;
  }

  // The output channels of the float conv (constant weights) that produces v and may write it
  // blocked, or 0 when v has no such producer.
  int64_t blockable_conv_channels(const std::string& v, int64_t blk) const {
    auto p = producer_.find(v);
    if (p == producer_.end()) return 0;
    const Node& c = g_.nodes[p->second];
    if (!blockable(c, blk, false) || int8_conv(c)) return 0;
    return constant(c.inputs[1])->dim(0);
  }

  // A squeeze-and-excitation scale (EfficientNet, MobileNetV3, RegNetY): Mul(X, S) or Mul(S, X)
  // where X is the output of a conv that may write blocked activations and S = Sigmoid or
  // HardSigmoid of a conv with constant weights of as many output channels as X has, so [N, C, 1, 1]
  // in those nets. Returns X's input index. (BlockedScale computes any other S as Mul would.)
  std::optional<size_t> se_scaled_input(const Node& n, int64_t blk) const {
    if (!default_domain(n) || n.op_type != "Mul" || n.inputs.size() != 2 || n.outputs.size() != 1 ||
        n.outputs[0].empty() || n.inputs[0] == n.inputs[1])
      return std::nullopt;
    for (size_t x = 0; x < 2; ++x) {
      const int64_t c = blockable_conv_channels(n.inputs[x], blk);
      auto sp = producer_.find(n.inputs[1 - x]);
      if (c == 0 || sp == producer_.end()) continue;
      const Node& sg = g_.nodes[sp->second];
      if (!default_domain(sg) || (sg.op_type != "Sigmoid" && sg.op_type != "HardSigmoid") || sg.inputs.size() != 1)
        continue;
      auto cp = producer_.find(sg.inputs[0]);
      if (cp == producer_.end()) continue;
      const Node& sc = g_.nodes[cp->second];
      const bool conv = (sc.op_type == "Conv" && default_domain(sc)) || (sc.op_type == "FusedConv" && sc.domain == kInternalDomain);
      const Tensor* w = conv && sc.inputs.size() > 1 ? constant(sc.inputs[1]) : nullptr;
      if (w && w->rank() == 4 && w->dim(0) == c) return x;
    }
    return std::nullopt;
  }

  // A Concat on the channel axis of conv outputs that may all go blocked, each but the last of
  // whole blocks of channels (so that the blocks of each follow the last one's): concatenates
  // blocked activations block by block (BlockedConcat). SqueezeNet's fire modules, GoogLeNet's and
  // Inception's branches (not DenseNet's, which join a pooled input).
  bool block_concatenable(const Node& n, int64_t blk) const {
    if (!default_domain(n) || n.op_type != "Concat" || n.inputs.size() < 2 || n.outputs.size() != 1 || n.outputs[0].empty())
      return false;
    const int64_t axis = n.attr_int("axis", 1);
    if (axis != 1 && axis != -3) return false;
    std::set<std::string> seen;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.inputs[k].empty() || !seen.insert(n.inputs[k]).second) return false;
      const int64_t ch = blockable_conv_channels(n.inputs[k], blk);
      if (ch == 0 || (k + 1 < n.inputs.size() && ch % blk != 0)) return false;
    }
    return true;
  }

  // A GlobalAveragePool or GlobalMaxPool: reads blocked activations as well (BlockedGlobalPool).
  static bool global_poolable(const Node& n) {
    return default_domain(n) && (n.op_type == "GlobalAveragePool" || n.op_type == "GlobalMaxPool") &&
           n.inputs.size() == 1 && n.outputs.size() == 1 && !n.outputs[0].empty();
  }

  // The live Transpose with permutation `perm` producing `v` (when `at` is SIZE_MAX), or reading it
  // (`at` = that Transpose) whose output only `reader` reads; its position.
  std::optional<size_t> transpose_into(const std::string& v, const std::vector<int64_t>& perm, size_t reader,
                                       size_t at = SIZE_MAX) const {
    size_t t = at;
    if (t == SIZE_MAX) {
      auto p = producer_.find(v);
      if (p == producer_.end()) return std::nullopt;
      t = p->second;
    }
    const Node& n = g_.nodes[t];
    if (is_dead(t) || n.op_type != "Transpose" || !default_domain(n) || n.inputs.size() != 1 || n.outputs.size() != 1)
      return std::nullopt;
    if (n.attr_ints("perm") != perm) return std::nullopt;
    if (at != SIZE_MAX) return n.inputs[0] == v ? std::optional<size_t>(t) : std::nullopt;
    auto r = only_reader(n.outputs[0]);
    if (!r || *r != reader) return std::nullopt;
    return t;
  }

  // A 2-d MaxPool without Indices or an AveragePool: runs on blocked activations as well.
  bool poolable(const Node& n) const {
    if (!default_domain(n) || (n.op_type != "MaxPool" && n.op_type != "AveragePool")) return false;
    if (n.inputs.size() != 1 || n.outputs.size() != 1 || n.outputs[0].empty()) return false;
    const Attribute* k = n.find_attr("kernel_shape");
    return k && k->ints.size() == 2 && n.attr_int("storage_order", 0) == 0;
  }

  // The graph without its dead nodes, each fused node where its chain's last node was.
  // Returns `fused`.
  int rebuild(std::map<size_t, Node>& replace, int fused) {
    if (!fused) return 0;
    std::vector<Node> nodes;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (auto it = replace.find(i); it != replace.end()) nodes.push_back(std::move(it->second));
      else if (!dead_[i]) nodes.push_back(std::move(g_.nodes[i]));
    }
    g_.nodes = std::move(nodes);
    add_domain();
    return fused;
  }

  static bool int8_conv(const Node& n) { return n.op_type == "Int8Conv" && n.domain == kInternalDomain; }
  // A pool turned into internal op `op` over activations blocked by `blk` (kind max / avg).
  static void as_blocked_pool(Node& n, const char* op, bool max, int64_t blk, int64_t channels) {
    n.set_attr(Attribute::make_string("kind", max ? "max" : "avg"));
    n.set_attr(Attribute::make_int("block", blk));
    n.set_attr(Attribute::make_int("channels", channels));
    n.op_type = op;
    n.domain = kInternalDomain;
  }
  // A Conv that takes a layout attribute runs as FusedConv (an Int8Conv takes them as it is).
  static void as_fused(Node& n) {
    if (int8_conv(n)) return;
    n.op_type = "FusedConv";
    n.domain = kInternalDomain;
  }

  void add_domain() { import_internal_domain(m_); }

  // The single reader of `v`, when v may be fused away.
  std::optional<size_t> only_reader(const std::string& v) const {
    if (pinned_.count(v)) return std::nullopt;
    auto it = readers_.find(v);
    if (it == readers_.end() || it->second.size() != 1) return std::nullopt;
    // A reader already taken by another chain (two convs meeting in one Add) is not available.
    if (is_dead(it->second[0])) return std::nullopt;
    return it->second[0];
  }

  // The next post-op reading `cur`; `next` gets the nodes it replaces (last one produces the result).
  std::optional<PostOp> match(const std::string& cur, bool sum_allowed, std::vector<size_t>& next,
                              std::string& residual) {
    next.clear();
    if (auto sw = match_swish(cur)) {
      next = *sw;
      return PostOp{"swish", 1.0f, 0.0f};
    }
    auto r = only_reader(cur);
    if (!r) return std::nullopt;
    const Node& n = g_.nodes[*r];
    if (!default_domain(n) || n.outputs.size() != 1 || n.outputs[0].empty()) return std::nullopt;
    next = {*r};
    const std::string& op = n.op_type;
    if (op == "Relu") return PostOp{"relu", 0.0f, 0.0f};
    if (op == "LeakyRelu") return PostOp{"relu", n.attr_float("alpha", 0.01f), 0.0f};
    if (op == "HardSwish") return PostOp{"hardswish", 0.0f, 0.0f};
    if (op == "Clip" && n.inputs[0] == cur) {
      float lo = -FLT_MAX, hi = FLT_MAX;
      if (n.has_attr("min") || n.has_attr("max") || n.inputs.size() == 1) {
        lo = n.attr_float("min", lo);
        hi = n.attr_float("max", hi);
      } else {
        for (int k = 1; k <= 2; ++k) {
          if (!n.has_input(k)) continue;
          const Tensor* t = constant(n.inputs[static_cast<size_t>(k)]);
          if (!t || t->dtype() != DType::Float || t->numel() != 1) return std::nullopt;
          (k == 1 ? lo : hi) = t->data<float>()[0];
        }
      }
      // ONNX gives max when min > max; oneDNN's clip would give min.
      if (!(lo <= hi)) return std::nullopt;
      return PostOp{"clip", lo, hi};
    }
    if (op == "Add" && sum_allowed && n.inputs.size() == 2 && !n.has_attr("broadcast") &&
        n.inputs[0] != n.inputs[1]) {
      residual = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
      return PostOp{"sum", 1.0f, 0.0f};
    }
    return std::nullopt;
  }

  // The two readers of v, when it has exactly two and may be fused away.
  const std::vector<size_t>* two_readers(const std::string& v) const {
    if (pinned_.count(v)) return nullptr;
    auto it = readers_.find(v);
    return it == readers_.end() || it->second.size() != 2 ? nullptr : &it->second;
  }

  // x -> Sigmoid -> Mul(x, sigmoid(x)): both readers of x, in either input order.
  std::optional<std::vector<size_t>> match_swish(const std::string& cur) const {
    const std::vector<size_t>* two = two_readers(cur);
    if (!two) return std::nullopt;
    for (int k = 0; k < 2; ++k) {
      size_t si = (*two)[static_cast<size_t>(k)], mi = (*two)[static_cast<size_t>(1 - k)];
      if (is_dead(si) || is_dead(mi)) continue;
      const Node& s = g_.nodes[si];
      const Node& mul = g_.nodes[mi];
      if (s.op_type != "Sigmoid" || !default_domain(s) || s.outputs.size() != 1) continue;
      if (mul.op_type != "Mul" || !default_domain(mul) || mul.inputs.size() != 2 || mul.outputs.size() != 1) continue;
      auto sr = only_reader(s.outputs[0]);
      if (!sr || *sr != mi) continue;
      const auto& in = mul.inputs;
      if ((in[0] == cur && in[1] == s.outputs[0]) || (in[1] == cur && in[0] == s.outputs[0]))
        return std::vector<size_t>{si, mi};
    }
    return std::nullopt;
  }

  // A float constant holding the single value v (to 1e-6 relative).
  bool is_scalar(const std::string& name, float v) const {
    const Tensor* t = constant(name);
    return t && t->dtype() == DType::Float && t->numel() == 1 && std::fabs(t->data<float>()[0] - v) <= 1e-6f * std::fabs(v);
  }
  // The node at `i` if it is a live default-domain `op` with two inputs and one output.
  const Node* binary(size_t i, const char* op) const {
    const Node& n = g_.nodes[i];
    if (is_dead(i) || n.op_type != op || !default_domain(n) || n.inputs.size() != 2 || n.outputs.size() != 1) return nullptr;
    return &n;
  }
  // The input of binary node n that is not `v` (n reads v once).
  static const std::string* other_input(const Node& n, const std::string& v) {
    if (n.inputs[0] == v && n.inputs[1] != v) return &n.inputs[1];
    if (n.inputs[1] == v && n.inputs[0] != v) return &n.inputs[0];
    return nullptr;
  }

  // The erf GELU of x as exported: x/√2 (or x·(1/√2)) -> Erf -> +1, times x, times 0.5 (the
  // halving first or last). Returns its five nodes, the result's producer last.
  std::optional<std::vector<size_t>> match_gelu(const std::string& x) const {
    const std::vector<size_t>* two = two_readers(x);
    if (!two) return std::nullopt;
    for (int k = 0; k < 2; ++k) {
      size_t di = (*two)[static_cast<size_t>(k)], mi = (*two)[static_cast<size_t>(1 - k)];
      const Node* d = binary(di, "Div");
      bool scaled = d && d->inputs[0] == x && is_scalar(d->inputs[1], 1.41421356f);
      if (!scaled) {
        d = binary(di, "Mul");
        const std::string* c = d ? other_input(*d, x) : nullptr;
        scaled = c && is_scalar(*c, 0.70710678f);
      }
      if (!scaled) continue;
      auto ei = only_reader(d->outputs[0]);
      if (!ei || g_.nodes[*ei].op_type != "Erf" || !default_domain(g_.nodes[*ei])) continue;
      auto ai = only_reader(g_.nodes[*ei].outputs[0]);
      const Node* a = ai ? binary(*ai, "Add") : nullptr;
      const std::string* one = a ? other_input(*a, g_.nodes[*ei].outputs[0]) : nullptr;
      if (!one || !is_scalar(*one, 1.0f)) continue;
      const std::string& t = a->outputs[0];  // 1 + erf(x/√2)
      const Node* m1 = binary(mi, "Mul");
      const std::string* m1_other = m1 ? other_input(*m1, x) : nullptr;
      if (!m1_other) continue;
      auto m2i = only_reader(m1->outputs[0]);
      const Node* m2 = m2i ? binary(*m2i, "Mul") : nullptr;
      const std::string* m2_other = m2 ? other_input(*m2, m1->outputs[0]) : nullptr;
      if (!m2_other) continue;
      // x·t then ·0.5, or x·0.5 then ·t; t read only there.
      bool last_half = *m1_other == t && is_scalar(*m2_other, 0.5f) && only_reader(t) == mi;
      bool first_half = is_scalar(*m1_other, 0.5f) && *m2_other == t && only_reader(t) == *m2i;
      if (!last_half && !first_half) continue;
      return std::vector<size_t>{di, *ei, *ai, mi, *m2i};
    }
    return std::nullopt;
  }

  const Tensor* constant(const std::string& name) const {
    if (const Initializer* init = g_.find_initializer(name)) {
      // An initializer that is also a graph input may be overridden at run time.
      return g_.find_input(name) ? nullptr : &init->tensor;
    }
    auto it = producer_.find(name);
    if (it == producer_.end()) return nullptr;
    const Node& n = g_.nodes[it->second];
    if (n.op_type != "Constant" || !default_domain(n)) return nullptr;
    return n.attr_tensor("value");
  }

  bool is_dead(size_t i) const { return i < dead_.size() && dead_[i]; }

  // Post-ops that oneDNN computes with max / min, which turn a NaN into a number.
  static bool drops_nan(const std::vector<PostOp>& ops) {
    return std::any_of(ops.begin(), ops.end(),
                       [](const PostOp& p) { return p.kind == "clip" || (p.kind == "relu" && p.alpha == 0.0f); });
  }

  // Whether one of `values` may hold a NaN or an infinity in a run whose inputs are all finite:
  // a constant that holds one, or a value computed through an op that can make one from finite
  // values (Log, Sqrt, Exp, Div or Pow but those of safe_power_or_division, ...; an op of another
  // domain; a control-flow op). The ops below only pass non-finite values on (overflow aside).
  // Runs whose inputs hold a NaN or an infinity are told at run time
  // (KernelContext::nonfinite_inputs).
  bool may_be_nonfinite(const std::vector<std::string>& values) {
    if (!nonfinite_ready_) {
      nonfinite_ready_ = true;
      static const std::set<std::string> passes = {
          "Abs", "Add", "And", "ArgMax", "ArgMin", "AveragePool", "BatchNormalization", "Cast", "CastLike", "Ceil",
          "Celu", "Clip", "Concat", "ConstantOfShape", "Conv", "ConvTranspose", "Cos", "DepthToSpace", "Dropout",
          "Einsum", "Elu", "Equal", "Erf", "Expand", "Flatten", "Floor", "Gather", "GatherElements", "GatherND",
          "Gelu", "Gemm", "GlobalAveragePool", "GlobalMaxPool", "Greater", "GreaterOrEqual", "GroupNormalization",
          "HardSigmoid", "HardSwish", "Hardmax", "Identity", "InstanceNormalization", "LayerNormalization",
          "LeakyRelu", "Less", "LessOrEqual", "LogSoftmax", "MatMul", "Max", "MaxPool", "Mean", "Min", "Mul", "Neg",
          "Not", "Or", "PRelu", "Pad", "Range", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum", "Relu",
          "Reshape", "Resize", "Round", "Selu", "Shape", "Shrink", "Sigmoid", "Sign", "Sin", "Size", "Slice",
          "Softmax", "Softsign", "SpaceToDepth", "Split", "Squeeze", "Sub", "Sum", "Tanh", "ThresholdedRelu",
          "Tile", "TopK", "Transpose", "Unsqueeze", "Upsample", "Where", "Xor"};
      static const std::set<std::string> internal = {"FusedConv", "FusedMatMul", "Attention", "HalfToFloat",
                                                     "QuantDequant", "Int8Conv", "Int8MatMul"};
      for (const Initializer& init : g_.initializers)
        if (init.tensor.has_nonfinite()) nonfinite_.insert(init.name);
      for (const Node& n : g_.nodes) {
        bool known = default_domain(n) ? passes.count(n.op_type) > 0 || safe_power_or_division(n)
                                       : n.domain == kInternalDomain && internal.count(n.op_type) > 0;
        bool bad = !known || any_tainted(n.inputs);
        if (n.op_type == "Constant" && default_domain(n)) {
          const Tensor* t = n.attr_tensor("value");
          bad = !t || t->has_nonfinite();
        }
        if (bad) nonfinite_.insert(n.outputs.begin(), n.outputs.end());
      }
    }
    return any_tainted(values);
  }
  bool any_tainted(const std::vector<std::string>& values) const {
    return std::any_of(values.begin(), values.end(), [&](const std::string& v) { return !v.empty() && nonfinite_.count(v); });
  }

  // Div by a constant of finite, non-zero values (an input scaled by 1/255, normalized by a std)
  // and Pow to a constant whole non-negative exponent make no NaN or infinity from finite values.
  bool safe_power_or_division(const Node& n) const {
    if ((n.op_type != "Div" && n.op_type != "Pow") || n.inputs.size() != 2) return false;
    const Tensor* c = constant(n.inputs[1]);
    if (!c || !c->raw() || (c->dtype() != DType::Float && c->dtype() != DType::Double)) return false;
    for (int64_t i = 0; i < c->numel(); ++i) {
      const double v = c->as_double(i);
      if (!std::isfinite(v)) return false;
      if (n.op_type == "Div" ? v == 0 : (v < 0 || v != std::floor(v))) return false;
    }
    return true;
  }

  Model& m_;
  Graph& g_;
  bool nonfinite_ready_ = false;
  std::set<std::string> nonfinite_;  // values that may_be_nonfinite
  std::vector<bool> dead_;  // nodes already folded into a fused node
  std::set<std::string> pinned_;
  std::map<std::string, std::vector<size_t>> readers_;
  std::map<std::string, size_t> producer_;
};

// Integer products (see optimize.h): the dynamic chain DynamicQuantizeLinear -> MatMulInteger ->
// Cast -> Mul(a_scale * Ws) [-> Add bias], and a static QDQ MatMul/Gemm (QuantizeLinear ->
// DequantizeLinear on the activation, DequantizeLinear of constant int8 weights), each become one
// Int8MatMul. The quantizing nodes go when nothing else reads them.
class Int8MatMulFuser {
 public:
  explicit Int8MatMulFuser(Model& m)
      : m_(m), g_(m.graph), consts_(constants_of(m.graph)), pinned_(pinned_names(m.graph)) {
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      const Node& n = g_.nodes[k];
      for (const auto& in : n.inputs)
        if (!in.empty()) readers_[in].push_back(k);
      for (const auto& out : n.outputs) producer_[out] = k;
    }
  }

  int run() {
    dead_.assign(g_.nodes.size(), false);
    std::map<size_t, std::vector<Node>> replace;
    int count = 0;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i]) continue;
      std::vector<size_t> chain;
      std::optional<Node> f = dynamic_chain(i, chain);
      if (!f) f = static_product(i, chain);
      if (!f) continue;
      for (size_t j : chain) dead_[j] = true;
      size_t last = *std::max_element(chain.begin(), chain.end());
      // A float conv's DequantizeLinear goes just before it (see float_conv).
      if (f->op_type == "Conv") replace[last] = std::move(before_);
      replace[last].push_back(std::move(*f));
      ++count;
    }
    if (!count) return 0;
    std::vector<Node> nodes;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (auto it = replace.find(i); it != replace.end()) {
        for (Node& n : it->second) nodes.push_back(std::move(n));
      } else if (!dead_[i]) {
        nodes.push_back(std::move(g_.nodes[i]));
      }
    }
    g_.nodes = std::move(nodes);
    for (Initializer& x : added_) g_.initializers.push_back(std::move(x));
    drop_unread({"DynamicQuantizeLinear", "QuantizeLinear", "DequantizeLinear", "Mul"});
    import_internal_domain(m_);
    return count;
  }

 private:
  const Tensor* constant(const std::string& name) const {
    auto it = consts_.find(name);
    return it == consts_.end() ? nullptr : it->second;
  }
  const Node* producer(const std::string& v) const {
    auto it = producer_.find(v);
    if (it == producer_.end() || dead_[it->second]) return nullptr;
    const Node& n = g_.nodes[it->second];
    return default_domain(n) ? &n : nullptr;
  }
  // The single reader of v (when v may be fused away): its index.
  std::optional<size_t> only_reader(const std::string& v) const {
    if (pinned_.count(v)) return std::nullopt;
    auto it = readers_.find(v);
    if (it == readers_.end() || it->second.size() != 1) return std::nullopt;
    size_t k = it->second[0];
    if (dead_[k] || !default_domain(g_.nodes[k])) return std::nullopt;
    return k;
  }
  static bool all_zero(const Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (t.as_int(i) != 0) return false;
    return true;
  }
  // Weight scales valid for N columns: one float, or N float along `axis` of a DequantizeLinear.
  // Rank 0 or 1 only: a [1, 1] scale would broadcast a 1-D product up to 2-D.
  bool column_scales(const Tensor& ws, int64_t n) const {
    if (!dtype_is_float(ws.dtype()) || ws.rank() > 1) return false;
    return ws.numel() == 1 || ws.numel() == n;
  }
  // A constant float bias of n values that adds to rows of n.
  const Tensor* bias_of(const std::string& name, int64_t n) const {
    const Tensor* b = constant(name);
    if (!b || b->dtype() != DType::Float || b->numel() != n) return nullptr;
    if (b->rank() == 1 || (b->rank() == 2 && b->dim(0) == 1)) return b;
    return nullptr;
  }
  // The single reader of `v` if it is an Add of a constant bias of n (of a conv's M channels:
  // channel_values); `bias` gets its name.
  std::optional<size_t> bias_add(const std::string& v, int64_t n, std::string& bias, bool conv = false) const {
    auto r = only_reader(v);
    if (!r) return std::nullopt;
    const Node& add = g_.nodes[*r];
    if (add.op_type != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1 || add.inputs[0] == add.inputs[1])
      return std::nullopt;
    const std::string& other = add.inputs[0] == v ? add.inputs[1] : add.inputs[0];
    if (conv) {
      const Tensor* b = constant(other);
      if (!b || b->dtype() != DType::Float || b->numel() != n || !channel_values(*b, n)) return std::nullopt;
    } else {
      // A [1, N] bias would add a dim to a 1-D product.
      const Tensor* b = bias_of(other, n);
      if (!b || b->rank() != 1) return std::nullopt;
    }
    bias = other;
    return r;
  }

  // Per-channel values of a 2-d conv's output [N, M, H, W]: one value, or M along dim 0 of
  // [M, 1, 1] or dim 1 of [1, M, 1, 1].
  static bool channel_values(const Tensor& t, int64_t m) {
    if (!dtype_is_float(t.dtype()) || t.rank() > 4) return false;
    if (t.numel() == 1) return true;
    if (t.numel() != m) return false;
    const Dims& d = t.dims();
    return (d.size() == 3 && d[0] == m) || (d.size() == 4 && d[0] == 1 && d[1] == m);
  }

  // MatMulInteger (ConvInteger) at i fed by DynamicQuantizeLinear (A and its zero point) and
  // constant int8 [K, N] ([M, C/group, KH, KW]) weights with zero point 0, read only by
  // Cast(float), read only by Mul with Mul(a_scale, Ws); then optionally Add of a constant bias.
  // A ConvInteger's chain becomes an Int8Conv without an activation scale (its dynamic form).
  std::optional<Node> dynamic_chain(size_t i, std::vector<size_t>& chain) {
    const Node& mi = g_.nodes[i];
    const bool conv = mi.op_type == "ConvInteger";
    if ((mi.op_type != "MatMulInteger" && !conv) || !default_domain(mi) || mi.inputs.size() < 3 || mi.outputs.size() != 1)
      return std::nullopt;
    const Node* dq = producer(mi.inputs[0]);
    if (!dq || dq->op_type != "DynamicQuantizeLinear" || dq->outputs.size() != 3 || mi.inputs[2] != dq->outputs[2] ||
        mi.inputs[0] != dq->outputs[0])
      return std::nullopt;
    const Tensor* w = constant(mi.inputs[1]);
    if (!w || w->dtype() != DType::Int8 || w->rank() != (conv ? 4 : 2)) return std::nullopt;
    int64_t n = w->dim(conv ? 0 : 1);
    if (mi.has_input(3)) {
      const Tensor* wz = constant(mi.inputs[3]);
      if (!wz || wz->dtype() != DType::Int8 || !all_zero(*wz)) return std::nullopt;
    }
    auto ci = only_reader(mi.outputs[0]);
    if (!ci) return std::nullopt;
    const Node& cast = g_.nodes[*ci];
    if (cast.op_type != "Cast" || cast.outputs.size() != 1 || cast.attr_int("to", 0) != static_cast<int64_t>(DType::Float))
      return std::nullopt;
    auto xi = only_reader(cast.outputs[0]);
    if (!xi) return std::nullopt;
    const Node& mul = g_.nodes[*xi];
    if (mul.op_type != "Mul" || mul.inputs.size() != 2 || mul.outputs.size() != 1 || mul.inputs[0] == mul.inputs[1])
      return std::nullopt;
    const std::string& sv = mul.inputs[0] == cast.outputs[0] ? mul.inputs[1] : mul.inputs[0];
    const Node* sm = producer(sv);
    if (!sm || sm->op_type != "Mul" || sm->inputs.size() != 2 || sm->outputs.size() != 1) return std::nullopt;
    const std::string& as = dq->outputs[1];
    std::string ws;
    if (sm->inputs[0] == as) ws = sm->inputs[1];
    else if (sm->inputs[1] == as) ws = sm->inputs[0];
    else return std::nullopt;
    const Tensor* wst = constant(ws);
    if (!wst || !(conv ? channel_values(*wst, n) : column_scales(*wst, n))) return std::nullopt;
    chain = {i, *ci, *xi};
    std::string out = mul.outputs[0], bias;
    if (auto ai = bias_add(out, n, bias, conv)) {
      chain.push_back(*ai);
      out = g_.nodes[*ai].outputs[0];
    }
    if (conv && !kern::int8_products_exact()) return float_conv(mi, *dq, *w, *wst, bias, out, chain);
    Node f = make(mi, {dq->inputs[0], mi.inputs[1], ws, bias}, out);
    if (conv) {
      f.op_type = "Int8Conv";
      f.attributes = mi.attributes;
    }
    return f;
  }

  // Without VNNI, int8 convolutions are slower than float ones: the dynamic conv chain becomes
  // DequantizeLinear(A_q, A_scale, A_zp) -> Conv with the dequantized weights (Wq * Ws) and the
  // bias, on the float fast paths. The values differ from the chain's by the float rounding of
  // the sums (the chain's are exact integers).
  // One DequantizeLinear per quantized activation serves the convs that come after it.
  Node float_conv(const Node& ci, const Node& dq, const Tensor& wq, const Tensor& ws, const std::string& bias,
                  const std::string& out, const std::vector<size_t>& chain) {
    const std::string base = out + "#dequantized";
    before_.clear();
    auto shared = dequantized_.find(dq.outputs[0]);
    if (shared == dequantized_.end() || shared->second.second > chain.front()) {
      Node d;
      d.op_type = "DequantizeLinear";
      d.name = ci.name + "/dequantize";
      d.inputs = {dq.outputs[0], dq.outputs[1], dq.outputs[2]};
      d.outputs = {base + "_input"};
      before_ = {d};
      shared = dequantized_.insert_or_assign(dq.outputs[0], std::make_pair(d.outputs[0], *std::max_element(chain.begin(), chain.end()))).first;
    }
    Tensor w(DType::Float, wq.dims());
    const int64_t m = wq.dim(0), per = m ? wq.numel() / m : 0;
    for (int64_t k = 0; k < m; ++k) {
      const float s = static_cast<float>(ws.as_double(ws.numel() == 1 ? 0 : k));
      for (int64_t j = 0; j < per; ++j) w.data<float>()[k * per + j] = static_cast<float>(wq.data<int8_t>()[k * per + j]) * s;
    }
    added_.push_back({base + "_weight", std::move(w), {}});
    Node c;
    c.op_type = "Conv";
    c.name = ci.name;
    c.doc_string = ci.doc_string;
    c.attributes = ci.attributes;
    c.inputs = {shared->second.first, base + "_weight"};
    if (!bias.empty()) {
      added_.push_back({base + "_bias", constant(bias)->reshaped({m}), {}});
      c.inputs.push_back(base + "_bias");
    }
    c.outputs = {out};
    return c;
  }

  // x of a QuantizeLinear -> DequantizeLinear pair with one constant scale and zero point (the
  // same in both): {x, scale, zero point}.
  std::optional<std::array<std::string, 3>> quantized_activation(const std::string& v) const {
    const Node* d = producer(v);
    if (!d || d->op_type != "DequantizeLinear" || d->inputs.size() != 3) return std::nullopt;
    const Node* q = producer(d->inputs[0]);
    if (!q || q->op_type != "QuantizeLinear" || q->inputs.size() != 3) return std::nullopt;
    const Tensor *s = constant(q->inputs[1]), *z = constant(q->inputs[2]);
    const Tensor *s2 = constant(d->inputs[1]), *z2 = constant(d->inputs[2]);
    if (!s || !z || !s2 || !z2 || s->numel() != 1 || z->numel() != 1 || s->dtype() != DType::Float) return std::nullopt;
    if ((z->dtype() != DType::UInt8 && z->dtype() != DType::Int8) || !s->equals(*s2) || !z->equals(*z2)) return std::nullopt;
    float sv = s->data<float>()[0];
    if (!std::isfinite(sv) || sv <= 0) return std::nullopt;
    return std::array<std::string, 3>{q->inputs[0], q->inputs[1], q->inputs[2]};
  }

  // Constant int8 weights behind a DequantizeLinear with zero point 0: {Wq, Ws}, when the scales
  // are one or one per column (`col_axis` of the rank-`rank` Wq).
  std::optional<std::array<std::string, 2>> quantized_weight(const std::string& v, int64_t col_axis, int64_t rank) const {
    const Node* d = producer(v);
    if (!d || d->op_type != "DequantizeLinear" || d->inputs.size() < 2) return std::nullopt;
    const Tensor* w = constant(d->inputs[0]);
    const Tensor* ws = constant(d->inputs[1]);
    if (!w || !ws || w->dtype() != DType::Int8 || w->rank() != rank) return std::nullopt;
    if (d->has_input(2)) {
      const Tensor* wz = constant(d->inputs[2]);
      if (!wz || !all_zero(*wz)) return std::nullopt;
    }
    if (ws->numel() != 1) {
      int64_t axis = d->attr_int("axis", 1);
      if (axis < 0) axis += rank;
      if (axis != col_axis || !column_scales(*ws, w->dim(col_axis))) return std::nullopt;
    } else if (!dtype_is_float(ws->dtype())) {
      return std::nullopt;
    }
    return std::array<std::string, 2>{d->inputs[0], d->inputs[1]};
  }

  // A static QDQ MatMul, Gemm or 2-d Conv; only where int8 products are exact and fast (VNNI):
  // elsewhere the float product of the folded weights is faster than reference int8 loops.
  std::optional<Node> static_product(size_t i, std::vector<size_t>& chain) const {
    const Node& p = g_.nodes[i];
    if (!default_domain(p) || p.outputs.size() != 1 || p.inputs.size() < 2) return std::nullopt;
    bool gemm = p.op_type == "Gemm", conv = p.op_type == "Conv";
    if (p.op_type != "MatMul" && !gemm && !conv) return std::nullopt;
    if (!kern::int8_products_exact()) return std::nullopt;
    bool trans_b = false;
    std::string bias;
    if (gemm) {
      trans_b = p.attr_int("transB", 0) != 0;
      if (p.attr_int("transA", 0) != 0 || p.attr_float("alpha", 1.0f) != 1.0f) return std::nullopt;
      if (p.has_input(2) && p.attr_float("beta", 1.0f) != 1.0f) return std::nullopt;
    } else if (!conv && p.inputs.size() != 2) {
      return std::nullopt;
    }
    auto x = quantized_activation(p.inputs[0]);
    auto w = x ? quantized_weight(p.inputs[1], conv ? 0 : trans_b ? 0 : 1, conv ? 4 : 2) : std::nullopt;
    if (!w) return std::nullopt;
    const Tensor* wt = constant((*w)[0]);
    int64_t n = wt->dim(conv || trans_b ? 0 : 1);
    chain = {i};
    std::string out = p.outputs[0];
    if ((gemm || conv) && p.has_input(2)) {
      const Tensor* b = bias_of(p.inputs[2], n);
      if (!b || (conv && b->rank() != 1)) return std::nullopt;
      bias = p.inputs[2];
    } else if (!conv) {
      if (auto ai = bias_add(out, n, bias)) {
        chain.push_back(*ai);
        out = g_.nodes[*ai].outputs[0];
      }
    }
    Node f = make(p, {(*x)[0], (*w)[0], (*w)[1], bias, (*x)[1], (*x)[2]}, out);
    if (conv) {
      f.op_type = "Int8Conv";
      f.attributes = p.attributes;
    } else if (trans_b) {
      f.set_attr(Attribute::make_int("trans_b", 1));
    }
    return f;
  }

  static Node make(const Node& like, std::vector<std::string> inputs, const std::string& out) {
    Node f;
    f.name = like.name;
    f.doc_string = like.doc_string;
    f.op_type = "Int8MatMul";
    f.domain = kInternalDomain;
    while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
    f.inputs = std::move(inputs);
    f.outputs = {out};
    return f;
  }

  // Removes nodes of these types whose outputs nothing reads any more (repeatedly).
  void drop_unread(const std::set<std::string>& ops) {
    for (bool changed = true; changed;) {
      changed = false;
      std::set<std::string> read(pinned_.begin(), pinned_.end());
      for (const Node& n : g_.nodes) read.insert(n.inputs.begin(), n.inputs.end());
      std::vector<Node> keep;
      for (Node& n : g_.nodes) {
        bool unread = default_domain(n) && ops.count(n.op_type) &&
                      std::none_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& o) { return read.count(o); });
        if (unread) changed = true;
        else keep.push_back(std::move(n));
      }
      g_.nodes = std::move(keep);
    }
  }

  Model& m_;
  Graph& g_;
  std::map<std::string, const Tensor*> consts_;
  std::set<std::string> pinned_;
  std::map<std::string, std::vector<size_t>> readers_;
  std::map<std::string, size_t> producer_;
  std::vector<bool> dead_;
  std::vector<Node> before_;        // nodes to put before the next float conv (float_conv)
  std::map<std::string, std::pair<std::string, size_t>> dequantized_;  // A_q -> (float A, placed at)
  std::vector<Initializer> added_;  // appended after the sweep: consts_ points into the list
};

// DequantizeLinear of constant int8 weights (static QDQ models) becomes the float initializer it
// computes, once at build: Conv/MatMul/Gemm then see constant weights, which they prepack (and
// Conv fuses), instead of dequantizing every weight on every run.
// `int32_only`: only int32 values (the quantized biases other quantizers write, folded before the
// int8 rewrites so that they see a float bias; int8 weights stay for them to take).
int fold_constant_dequantize(Model& m, bool int32_only = false) {
  Graph& g = m.graph;
  std::map<std::string, const Tensor*> consts = constants_of(g);
  std::vector<Initializer> folded;
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (n.op_type != "DequantizeLinear" || !default_domain(n) || n.outputs.size() != 1 || n.inputs.empty()) continue;
    if (int32_only) {
      auto x = consts.find(n.inputs[0]);
      if (x == consts.end() || x->second->dtype() != DType::Int32) continue;
    }
    Model one;
    one.opset_import = {{"", m.opset("")}};
    bool constant = true;
    for (const std::string& in : n.inputs) {
      if (in.empty()) continue;
      auto it = consts.find(in);
      if (it == consts.end()) constant = false;
      else one.graph.initializers.push_back({in, *it->second, {}});
    }
    if (!constant) continue;
    one.graph.nodes.push_back(n);
    one.graph.outputs.push_back({n.outputs[0], Type::tensor(DType::Undefined), {}});
    try {
      SessionOptions so;
      so.fast_paths = false;
      so.threads = 1;
      Tensor t = Session(std::move(one), so).run({}).at(n.outputs[0]).tensor;
      folded.push_back({n.outputs[0], t, {}});
      dead[k] = true;
    } catch (const Error&) {
      // Left as it is: running the node reports the problem with its context.
    }
  }
  if (folded.empty()) return 0;
  std::vector<Node> nodes;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (!dead[k]) nodes.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(nodes);
  for (Initializer& i : folded) g.initializers.push_back(std::move(i));
  return static_cast<int>(folded.size());
}

// QuantizeLinear -> DequantizeLinear with the same constant per-tensor scale and zero point, whose
// quantized value nothing else reads, becomes one QuantDequant node (one pass over the activation
// instead of two, threaded).
int fuse_quant_dequant(Model& m) {
  Graph& g = m.graph;
  std::map<std::string, const Tensor*> consts = constants_of(g);
  std::map<std::string, int> reads;
  const std::set<std::string> pinned = pinned_names(g);
  std::map<std::string, size_t> producer;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    for (const auto& in : n.inputs) ++reads[in];
    for (const auto& out : n.outputs) producer[out] = k;
  }
  auto scalar = [&](const std::string& name, bool scale) {
    auto it = consts.find(name);
    if (it == consts.end() || it->second->numel() != 1) return false;
    DType t = it->second->dtype();
    return scale ? t == DType::Float : (t == DType::UInt8 || t == DType::Int8);
  };
  auto same_value = [&](const std::string& a, const std::string& b) {
    return a == b || (consts.count(a) && consts.count(b) && consts[a]->equals(*consts[b]));
  };
  std::vector<bool> dead(g.nodes.size(), false);
  int count = 0;
  for (Node& d : g.nodes) {
    if (d.op_type != "DequantizeLinear" || !default_domain(d) || d.inputs.size() != 3 || d.outputs.size() != 1) continue;
    auto p = producer.find(d.inputs[0]);
    if (p == producer.end() || dead[p->second]) continue;
    const Node& q = g.nodes[p->second];
    if (q.op_type != "QuantizeLinear" || !default_domain(q) || q.inputs.size() != 3 || q.outputs.size() != 1) continue;
    if (reads[q.outputs[0]] != 1 || pinned.count(q.outputs[0])) continue;
    if (!scalar(q.inputs[1], true) || !scalar(q.inputs[2], false) || !same_value(q.inputs[1], d.inputs[1]) ||
        !same_value(q.inputs[2], d.inputs[2]))
      continue;
    bool plain = std::all_of(q.attributes.begin(), q.attributes.end(), [](const Attribute& a) { return a.name == "axis"; });
    if (!plain) continue;
    Node f;
    f.op_type = "QuantDequant";
    f.domain = kInternalDomain;
    f.name = d.name;
    f.doc_string = d.doc_string;
    f.inputs = q.inputs;
    f.outputs = d.outputs;
    d = std::move(f);
    dead[p->second] = true;
    ++count;
  }
  if (!count) return 0;
  std::vector<Node> nodes;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (!dead[k]) nodes.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(nodes);
  import_internal_domain(m);
  return count;
}

// A node's constant inputs by position (initializers that are not graph inputs), and the checks
// the QOperator rewrites share.
class ConstantInputs {
 public:
  explicit ConstantInputs(const Graph& g) : consts_(constants_of(g)) {}
  const Tensor* operator()(const Node& n, int k) const {
    if (!n.has_input(k)) return nullptr;
    auto it = consts_.find(n.inputs[static_cast<size_t>(k)]);
    return it == consts_.end() ? nullptr : it->second;
  }
  // A scale at k (one finite float > 0) and an 8-bit zero point at k + 1, both constant: what
  // the int8 kernels take (kern::constant_quant_param).
  bool scalar_quant(const Node& n, int k) const {
    const Tensor *s = (*this)(n, k), *z = (*this)(n, k + 1);
    return s && z && s->numel() == 1 && s->dtype() == DType::Float && std::isfinite(s->data<float>()[0]) &&
           s->data<float>()[0] > 0 && z->numel() == 1 && (z->dtype() == DType::UInt8 || z->dtype() == DType::Int8);
  }
  // int8 weight zero points, all 0.
  static bool zero_int8(const Tensor& z) {
    bool zero = z.dtype() == DType::Int8;
    for (int64_t i = 0; zero && i < z.numel(); ++i) zero = z.as_int(i) == 0;
    return zero;
  }

 private:
  std::map<std::string, const Tensor*> consts_;
};

// Recurrent layers named under kInt8RecurrentKey with DequantizeLinear int8 weights become
// Int8LSTM / Int8GRU / Int8RNN (runtime/optimize.h); the DequantizeLinear nodes go when nothing
// else reads them.
int int8_recurrent(Model& m) {
  if (!kern::rnn_int8_supported()) return 0;
  std::set<std::string> wanted;
  for (const auto& [key, value] : m.metadata_props) {
    if (key != kInt8RecurrentKey) continue;
    size_t at = 0;
    while (at <= value.size()) {
      size_t end = value.find('\n', at);
      if (end == std::string::npos) end = value.size();
      if (end > at) wanted.insert(value.substr(at, end - at));
      at = end + 1;
    }
  }
  if (wanted.empty()) return 0;
  Graph& g = m.graph;
  const ConstantInputs constant(g);
  const std::set<std::string> pinned = pinned_names(g);
  std::map<std::string, size_t> producer;
  std::map<std::string, int> reads;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (const auto& in : g.nodes[k].inputs) ++reads[in];
    for (const auto& out : g.nodes[k].outputs) producer[out] = k;
  }
  // The DequantizeLinear writing `v`, when it dequantizes constant int8 [D, rows, K] with zero
  // point 0 and one scale or one per row.
  auto int8_weight = [&](const std::string& v) -> const Node* {
    auto it = producer.find(v);
    if (it == producer.end()) return nullptr;
    const Node& dq = g.nodes[it->second];
    if (dq.op_type != "DequantizeLinear" || !default_domain(dq) || dq.outputs.size() != 1) return nullptr;
    const Tensor *q = constant(dq, 0), *s = constant(dq, 1), *z = constant(dq, 2);
    if (!q || !s || q->dtype() != DType::Int8 || q->rank() != 3 || s->dtype() != DType::Float) return nullptr;
    if (dq.has_input(2) && (!z || !ConstantInputs::zero_int8(*z))) return nullptr;
    if (s->numel() != 1) {
      int64_t axis = dq.attr_int("axis", 1);
      if (s->rank() != 1 || s->numel() != q->dim(1) || (axis != 1 && axis != -2)) return nullptr;
    }
    for (int64_t i = 0; i < s->numel(); ++i)
      if (!(s->data<float>()[i] > 0) || !std::isfinite(s->data<float>()[i])) return nullptr;
    return &dq;
  };
  std::set<const Node*> drop;
  int count = 0;
  for (Node& n : g.nodes) {
    if (!default_domain(n) || (n.op_type != "LSTM" && n.op_type != "GRU" && n.op_type != "RNN")) continue;
    if (!wanted.count(n.name) || n.inputs.size() < 3 || n.inputs.size() > 8) continue;
    const Node* w = int8_weight(n.inputs[1]);
    const Node* r = int8_weight(n.inputs[2]);
    if (!w || !r) continue;
    for (const Node* dq : {w, r})
      if (reads[dq->outputs[0]] == 1 && !pinned.count(dq->outputs[0])) drop.insert(dq);
    n.op_type = "Int8" + n.op_type;
    n.domain = kInternalDomain;
    n.inputs.resize(8);
    n.inputs[1] = w->inputs[0];
    n.inputs[2] = r->inputs[0];
    n.inputs.push_back(w->inputs[1]);
    n.inputs.push_back(r->inputs[1]);
    ++count;
  }
  if (!drop.empty()) {
    std::vector<Node> nodes;
    for (Node& n : g.nodes)
      if (!drop.count(&n)) nodes.push_back(std::move(n));
    g.nodes = std::move(nodes);
  }
  if (count) import_internal_domain(m);
  return count;
}

// QLinearConv (QOperator models) with int8 weights of zero point 0 and constant quantizations
// becomes an Int8Conv reading and writing 8-bit NCHW (src_quantized, y_scale / y_zero_point);
// its int32 bias B becomes the float B * x_scale * w_scale. VNNI only, as the QDQ rewrites.
int qlinear_conv_to_int8(Model& m) {
  if (!kern::int8_products_exact()) return 0;
  Graph& g = m.graph;
  const ConstantInputs constant(g);
  std::vector<Initializer> added;
  std::set<std::string> names;
  for (const Initializer& i : g.initializers) names.insert(i.name);
  for (const Node& n : g.nodes) names.insert(n.outputs.begin(), n.outputs.end());
  int count = 0;
  for (Node& n : g.nodes) {
    if (n.op_type != "QLinearConv" || !default_domain(n) || n.outputs.size() != 1 || n.inputs.size() < 8) continue;
    const Tensor *w = constant(n, 3), *ws = constant(n, 4), *wz = constant(n, 5);
    if (!w || !ws || !wz || w->dtype() != DType::Int8 || w->rank() != 4 || !constant.scalar_quant(n, 1) ||
        !constant.scalar_quant(n, 6))
      continue;
    const int64_t mo = w->dim(0);
    if (ws->dtype() != DType::Float || ws->rank() > 1 || (ws->numel() != 1 && ws->numel() != mo)) continue;
    if (!ConstantInputs::zero_int8(*wz)) continue;
    std::string bias;
    if (n.has_input(8)) {
      const Tensor* b = constant(n, 8);
      if (!b || b->dtype() != DType::Int32 || b->numel() != mo) continue;
      const float xs = constant(n, 1)->data<float>()[0];
      Tensor bf(DType::Float, {mo});
      for (int64_t i = 0; i < mo; ++i)
        bf.data<float>()[i] = static_cast<float>(b->data<int32_t>()[i]) * (xs * ws->data<float>()[ws->numel() == 1 ? 0 : i]);
      bias = n.inputs[8] + "#float";
      while (names.count(bias)) bias += "_";
      names.insert(bias);
      added.push_back({bias, bf, {}});
    }
    Node f;
    f.name = n.name;
    f.doc_string = n.doc_string;
    f.op_type = "Int8Conv";
    f.domain = kInternalDomain;
    f.attributes = n.attributes;
    f.set_attr(Attribute::make_int("src_quantized", 1));
    f.inputs = {n.inputs[0], n.inputs[3], n.inputs[4], bias, n.inputs[1], n.inputs[2], n.inputs[6], n.inputs[7]};
    f.outputs = n.outputs;
    n = std::move(f);
    ++count;
  }
  for (Initializer& i : added) g.initializers.push_back(std::move(i));
  if (count) import_internal_domain(m);
  return count;
}

// A float activation that only Int8Convs read (as X, or as the residual R), written by an
// Int8Conv, stays channels-last: when the readers all take it as X and quantize it with the same
// scale and zero point, the writer stores it quantized (its inputs 6 and 7 are theirs; readers get
// src_quantized, the value is renamed "<name>#quantized"), else as float NHWC ("<name>#nhwc",
// dst_nhwc / src_nhwc / res_nhwc), which the readers quantize, or add, without a transpose.
int int8_channels_last(Model& m) {
  Graph& g = m.graph;
  std::map<std::string, const Tensor*> consts = constants_of(g);
  auto constant = [&](const std::string& name) -> const Tensor* {
    auto it = consts.find(name);
    return it == consts.end() ? nullptr : it->second;
  };
  std::set<std::string> names;
  const std::set<std::string> pinned = pinned_names(g);
  std::map<std::string, std::vector<std::pair<size_t, size_t>>> readers;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      readers[n.inputs[j]].push_back({k, j});
      names.insert(n.inputs[j]);
    }
    names.insert(n.outputs.begin(), n.outputs.end());
  }
  auto int8_conv = [](const Node& n) { return n.op_type == "Int8Conv" && n.domain == kInternalDomain; };
  int count = 0;
  for (Node& p : g.nodes) {
    if (!int8_conv(p) || p.outputs.size() != 1 || pinned.count(p.outputs[0])) continue;
    auto it = readers.find(p.outputs[0]);
    if (it == readers.end()) continue;
    bool only_convs = std::all_of(it->second.begin(), it->second.end(), [&](const std::pair<size_t, size_t>& r) {
      return (r.second == 0 || r.second == 8) && int8_conv(g.nodes[r.first]);
    });
    if (!only_convs) continue;
    const bool as_residual = std::any_of(it->second.begin(), it->second.end(),
                                         [](const std::pair<size_t, size_t>& r) { return r.second == 8; });
    // A residual reader adds the float value: nothing quantized then.
    if (as_residual && p.has_input(6)) continue;
    // A writer that quantizes its output already (a QLinearConv) has readers that take it as it
    // is: only the layout changes. Otherwise readers that all quantize with one scale and zero
    // point get the quantized value itself.
    const bool written_quantized = p.has_input(6);
    const Node& first = g.nodes[it->second[0].first];
    bool readers_quantized = true;
    for (const auto& r : it->second)
      readers_quantized = readers_quantized && r.second == 0 && g.nodes[r.first].attr_int("src_quantized", 0);
    if (written_quantized != readers_quantized) continue;
    const Tensor* s0 = first.has_input(4) ? constant(first.inputs[4]) : nullptr;
    const Tensor* z0 = first.has_input(5) ? constant(first.inputs[5]) : nullptr;
    // A writer with a residual sum stores float: oneDNN's sum reads what the output holds, in
    // the output's type.
    bool same_q = s0 && z0 && !as_residual && !p.has_input(8);
    for (const auto& r : it->second) {
      const Node& n = g.nodes[r.first];
      const Tensor* s1 = n.has_input(4) ? constant(n.inputs[4]) : nullptr;
      const Tensor* z1 = n.has_input(5) ? constant(n.inputs[5]) : nullptr;
      same_q = same_q && s1 && z1 && s1->equals(*s0) && z1->equals(*z0);
    }
    // Already-quantized values go as they are, whatever quantization each reader states.
    if (written_quantized) same_q = true;
    std::string v = p.outputs[0], nv = v + (same_q ? "#quantized" : "#nhwc");
    while (names.count(nv)) nv += "_";
    names.insert(nv);
    p.outputs[0] = nv;
    if (same_q && !written_quantized) {
      p.inputs.resize(std::max<size_t>(p.inputs.size(), 6));
      p.inputs.resize(8);
      p.inputs[6] = first.inputs[4];
      p.inputs[7] = first.inputs[5];
    }
    p.set_attr(Attribute::make_int("dst_nhwc", 1));
    for (const auto& [k, j] : it->second) {
      g.nodes[k].inputs[j] = nv;
      g.nodes[k].set_attr(Attribute::make_int(j == 8 ? "res_nhwc" : "src_nhwc", 1));
      if (same_q) g.nodes[k].set_attr(Attribute::make_int("src_quantized", 1));
    }
    ++count;
  }
  return count;
}

}  // namespace

// Conv, ConvTranspose, MatMul and Gemm on float16 (a constant float16 input says the node's type
// is float16: the files `quantize --mode fp16` writes) compute in float32 on the fast kernels: the
// constant inputs become float32 initializers (converted once here, exactly); the others go
// through internal::HalfToFloat, a Cast to float32 that refuses other types (one per value,
// shared by its readers; also after another such product, whose result the file rounds to float16
// first); a Cast back to float16 restores the output under its own name. The reference kernels
// also compute these ops in float32 and round the result to float16 once, so the values only
// differ by float32 summation order.
int float16_products_in_float32(Model& m) {
  Graph& g = m.graph;
  static const std::set<std::string> ops{"Conv", "ConvTranspose", "MatMul", "Gemm"};
  std::map<std::string, const Tensor*> consts = constants_of(g);
  const std::set<std::string> pinned = pinned_names(g);
  std::map<std::string, std::string> f32_of;  // float16 value -> its float32 version
  std::vector<Initializer> added;
  std::vector<Node> nodes;
  int count = 0;
  auto cast = [](const std::string& x, const std::string& y, DType to) {
    Node c;
    c.op_type = "Cast";
    c.name = y + "/cast";
    c.inputs = {x};
    c.outputs = {y};
    c.set_attr(Attribute::make_int("to", static_cast<int64_t>(to)));
    return c;
  };
  for (Node& n : g.nodes) {
    bool half_weight = false, other_constant = false;
    if (default_domain(n) && ops.count(n.op_type))
      for (const std::string& in : n.inputs) {
        auto c = consts.find(in);
        if (c == consts.end()) continue;
        (c->second->dtype() == DType::Float16 ? half_weight : other_constant) = true;
      }
    if (!half_weight || other_constant) {
      nodes.push_back(std::move(n));
      continue;
    }
    for (std::string& in : n.inputs) {
      if (in.empty()) continue;
      auto known = f32_of.find(in);
      if (known == f32_of.end()) {
        std::string name = in + "#as_f32";
        if (auto c = consts.find(in); c != consts.end()) {
          const Tensor& h = *c->second;
          Tensor f(DType::Float, h.dims());
          halves_to_floats(reinterpret_cast<const uint16_t*>(h.data<Half>()), f.data<float>(), static_cast<size_t>(h.numel()));
          added.push_back({name, std::move(f), {}});
        } else {
          Node h = cast(in, name, DType::Float);
          h.op_type = "HalfToFloat";
          h.domain = kInternalDomain;
          h.attributes.clear();
          h.name = n.name + "/" + name;  // names the product in errors
          nodes.push_back(std::move(h));
        }
        known = f32_of.emplace(in, name).first;
      }
      in = known->second;
    }
    std::vector<Node> back;
    for (std::string& out : n.outputs) {
      if (out.empty()) continue;
      back.push_back(cast(out + "#f32", out, DType::Float16));
      out += "#f32";
    }
    nodes.push_back(std::move(n));
    for (Node& b : back) nodes.push_back(std::move(b));
    ++count;
  }
  g.nodes = std::move(nodes);
  if (count == 0) return 0;
  import_internal_domain(m);
  // The float16 weights nothing reads any more go.
  std::set<std::string> read(pinned);
  for (const Node& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  std::vector<Initializer> kept;
  for (Initializer& i : g.initializers)
    if (read.count(i.name) || !consts.count(i.name) || !f32_of.count(i.name)) kept.push_back(std::move(i));
  for (Initializer& i : added) kept.push_back(std::move(i));
  g.initializers = std::move(kept);
  return count;
}

// QLinearMatMul (QOperator models) with constant 2-D int8 weights of zero point 0 (their scale
// one or per column) and constant scalar quantizations of A and Y becomes an Int8MatMul reading
// and writing 8-bit values (src_quantized, y_scale / y_zero_point). VNNI only, as above.
int qlinear_matmul_to_int8(Model& m) {
  if (!kern::int8_products_exact()) return 0;
  Graph& g = m.graph;
  const ConstantInputs constant(g);
  int count = 0;
  for (Node& n : g.nodes) {
    if (n.op_type != "QLinearMatMul" || !default_domain(n) || n.outputs.size() != 1 || n.inputs.size() != 8) continue;
    const Tensor *w = constant(n, 3), *ws = constant(n, 4), *wz = constant(n, 5);
    if (!w || !ws || !wz || w->dtype() != DType::Int8 || w->rank() != 2) continue;
    if (ws->dtype() != DType::Float || ws->rank() > 1 || (ws->numel() != 1 && ws->numel() != w->dim(1))) continue;
    if (!ConstantInputs::zero_int8(*wz) || !constant.scalar_quant(n, 1) || !constant.scalar_quant(n, 6)) continue;
    Node f;
    f.name = n.name;
    f.doc_string = n.doc_string;
    f.op_type = "Int8MatMul";
    f.domain = kInternalDomain;
    f.set_attr(Attribute::make_int("src_quantized", 1));
    f.inputs = {n.inputs[0], n.inputs[3], n.inputs[4], "", n.inputs[1], n.inputs[2], n.inputs[6], n.inputs[7]};
    f.outputs = n.outputs;
    n = std::move(f);
    ++count;
  }
  if (count) import_internal_domain(m);
  return count;
}

int optimize_for_runtime(Model& m) {
  int fused = float16_products_in_float32(m);
  fused += int8_recurrent(m);
  fused += fold_constant_dequantize(m, true);
  fused += qlinear_conv_to_int8(m);
  fused += qlinear_matmul_to_int8(m);
  fused += Int8MatMulFuser(m).run();
  fused += fold_constant_dequantize(m);
  fused += fuse_quant_dequant(m);
  fused += Fuser(m).fuse_matmuls();
  fused += Fuser(m).fuse_attention(m.opset(""));
  fused += Fuser(m).run();
  fused += int8_channels_last(m);
  // A fresh analysis: fusion renumbered the nodes.
  return fused + Fuser(m).block_layouts(kern::channel_block());
}

}  // namespace t2o
