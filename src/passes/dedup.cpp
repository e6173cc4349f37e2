// Sharing what is computed or stored twice: identical initializers are stored once, and nodes
// with the same op, attributes and inputs are computed once. Exact.
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "passes/graph_util.h"
#include "passes/internal.h"

namespace t2o::passes {

namespace {

std::string tensor_key(const Tensor& t) {
  std::string k = std::to_string(static_cast<int>(t.dtype())) + "[" + dims_to_string(t.dims()) + "]";
  if (t.dtype() == DType::String) {
    for (int64_t i = 0; i < t.numel(); ++i) k += std::to_string(t.strings()[i].size()) + ":" + t.strings()[i];
  } else {
    k.append(static_cast<const char*>(t.raw()), t.nbytes());
  }
  return k;
}

// A hash of a few samples of the bytes (start, middle, end): distinct weights almost always
// differ there, so only true duplicates (or near ones) get compared in full.
uint64_t sample_hash(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.raw());
  size_t n = t.nbytes();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  auto mix = [&](size_t from, size_t len) {
    for (size_t i = from; i < std::min(n, from + len); ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  };
  mix(0, 64);
  mix(n / 2, 64);
  mix(n > 64 ? n - 64 : 0, 64);
  return h;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.dims() != b.dims()) return false;
  if (a.dtype() == DType::String) return tensor_key(a) == tensor_key(b);
  return std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Attributes as a string that is equal exactly when they are (nullopt: has a subgraph).
std::optional<std::string> attr_key(const Node& n) {
  std::vector<const Attribute*> attrs;
  for (const Attribute& a : n.attributes) attrs.push_back(&a);
  std::sort(attrs.begin(), attrs.end(), [](const Attribute* a, const Attribute* b) { return a->name < b->name; });
  std::string k;
  for (const Attribute* a : attrs) {
    if (a->g || !a->graphs.empty() || !a->ref_attr_name.empty()) return std::nullopt;
    k += a->name + "=" + std::to_string(static_cast<int>(a->type)) + ":";
    uint32_t bits;
    switch (a->type) {
      case AttrType::Float:
        std::memcpy(&bits, &a->f, 4);
        k += std::to_string(bits);
        break;
      case AttrType::Int: k += std::to_string(a->i); break;
      case AttrType::String: k += std::to_string(a->s.size()) + ":" + a->s; break;
      case AttrType::Floats:
        for (float f : a->floats) {
          std::memcpy(&bits, &f, 4);
          k += std::to_string(bits) + ",";
        }
        break;
      case AttrType::Ints:
        for (int64_t v : a->ints) k += std::to_string(v) + ",";
        break;
      case AttrType::Strings:
        for (const auto& v : a->strings) k += std::to_string(v.size()) + ":" + v;
        break;
      case AttrType::Tensor: k += tensor_key(a->t); break;
      default: return std::nullopt;
    }
    k += ";";
  }
  return k;
}

const std::set<std::string> kNondeterministic{"RandomNormal", "RandomUniform", "RandomNormalLike",
                                              "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"};

}  // namespace

int dedup_initializers(Model& m, PassContext& ctx) {
  return for_each_graph(m, [&](Scope& s) {
    Graph& g = s.graph();
    Uses u(g);
    std::set<std::string> inputs;
    for (const auto& i : g.inputs) inputs.insert(i.name);
    // Only initializers that share dtype and dims with another one are hashed.
    std::map<std::pair<int, Dims>, std::vector<size_t>> by_type;
    for (size_t i = 0; i < g.initializers.size(); ++i) {
      const Initializer& init = g.initializers[i];
      // Unread ones are eliminate_dead's; inputs and outputs are part of the interface.
      if (inputs.count(init.name) || u.is_output(init.name) || u.count(init.name) == 0) continue;
      by_type[{static_cast<int>(init.tensor.dtype()), init.tensor.dims()}].push_back(i);
    }
    std::vector<bool> drop(g.initializers.size());
    int n = 0;
    for (auto& [key, idx] : by_type) {
      if (idx.size() < 2) continue;
      std::unordered_map<uint64_t, std::vector<size_t>> seen;
      for (size_t i : idx) {
        const Initializer& init = g.initializers[i];
        auto& bucket = seen[init.tensor.dtype() == DType::String ? 0 : sample_hash(init.tensor)];
        std::optional<size_t> same;
        for (size_t j : bucket)
          if (same_tensor(g.initializers[j].tensor, init.tensor)) same = j;
        if (!same) {
          bucket.push_back(i);
          continue;
        }
        Node anchor;
        anchor.name = "initializer " + init.name;
        if (!ctx.allow(anchor) || !replace_uses(g, init.name, g.initializers[*same].name)) continue;
        drop[i] = true;
        ++n;
      }
    }
    std::vector<Initializer> kept;
    for (size_t i = 0; i < g.initializers.size(); ++i)
      if (!drop[i]) kept.push_back(std::move(g.initializers[i]));
    g.initializers = std::move(kept);
    return n;
  });
}

int eliminate_common_subexpressions(Model& m, PassContext& ctx) {
  return for_each_graph(m, [&](Scope& s) {
    Graph& g = s.graph();
    Uses u(g);
    std::unordered_map<std::string, size_t> first;
    int n = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      Node& node = g.nodes[i];
      if (!is_onnx(node) || node.outputs.empty() || node.op_type == "Constant" || kNondeterministic.count(node.op_type))
        continue;
      auto ak = attr_key(node);
      if (!ak) continue;
      std::string key = node.op_type + "|" + std::to_string(node.outputs.size()) + "|";
      for (const auto& in : node.inputs) key += std::to_string(in.size()) + ":" + in;
      key += "|" + *ak;
      auto [it, fresh] = first.emplace(key, i);
      if (fresh) continue;
      const Node& keep = g.nodes[it->second];
      bool ok = true;
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        const std::string& o = node.outputs[k];
        if (o.empty()) continue;
        if (u.is_output(o) || keep.outputs[k].empty()) ok = false;
      }
      if (!ok || !ctx.allow(node)) continue;
      for (size_t k = 0; k < node.outputs.size() && ok; ++k)
        if (!node.outputs[k].empty()) ok = replace_uses(g, node.outputs[k], keep.outputs[k]);
      if (!ok) continue;
      remove_node(node);
      ++n;
    }
    drop_removed(g);
    return n;
  });
}

}  // namespace t2o::passes
