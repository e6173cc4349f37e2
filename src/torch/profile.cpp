#include "torch/profile.h"

#include <ATen/Parallel.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>

#include "ir/error.h"

namespace t2o {

namespace tj = torch::jit;

DType dtype_from_scalar_type(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return DType::Float;
    case c10::kDouble: return DType::Double;
    case c10::kHalf: return DType::Float16;
    case c10::kBFloat16: return DType::BFloat16;
    case c10::kByte: return DType::UInt8;
    case c10::kChar: return DType::Int8;
    case c10::kShort: return DType::Int16;
    case c10::kInt: return DType::Int32;
    case c10::kLong: return DType::Int64;
    case c10::kBool: return DType::Bool;
    default: return DType::Undefined;
  }
}

c10::ScalarType scalar_type_from_dtype(DType t) {
  switch (t) {
    case DType::Float: return c10::kFloat;
    case DType::Double: return c10::kDouble;
    case DType::Float16: return c10::kHalf;
    case DType::BFloat16: return c10::kBFloat16;
    case DType::UInt8: return c10::kByte;
    case DType::Int8: return c10::kChar;
    case DType::Int16: return c10::kShort;
    case DType::Int32: return c10::kInt;
    case DType::Int64: return c10::kLong;
    case DType::Bool: return c10::kBool;
    default: throw Error("element type " + std::string(dtype_name(t)) + " has no torch equivalent", {}, kExitUsage);
  }
}

Observed observe(const c10::IValue& v) {
  Observed o;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    o.kind = Observed::Kind::Tensor;
    if (!t.defined()) return o;
    // Complex tensors: the converter holds them as real tensors with a last dim of 2 (ops/spectral.cpp).
    o.dtype = t.scalar_type() == c10::kComplexFloat    ? DType::Complex64
              : t.scalar_type() == c10::kComplexDouble ? DType::Complex128
                                                       : dtype_from_scalar_type(t.scalar_type());
    if (t.is_quantized()) {
      o.quantized = true;
      o.dtype = DType::Float;
      o.qdtype = dtype_from_scalar_type(c10::toUnderlying(t.scalar_type()));
      o.per_channel = t.qscheme() != c10::kPerTensorAffine && t.qscheme() != c10::kPerTensorSymmetric;
      if (!o.per_channel) {
        o.qscale = t.q_scale();
        o.qzero = t.q_zero_point();
      }
    }
    // Nested tensors (nn.TransformerEncoder's padding-mask fast path) are held padded: their sizes
    // are the padded tensor's.
    o.sizes = t.is_nested() ? t.to_padded_tensor(0).sizes().vec() : t.sizes().vec();
  } else if (v.isInt() || v.isDouble() || v.isBool()) {
    o.kind = v.isInt() ? Observed::Kind::Int : v.isDouble() ? Observed::Kind::Float : Observed::Kind::Bool;
    o.dtype = v.isInt() ? DType::Int64 : v.isDouble() ? DType::Float : DType::Bool;
    o.first = v;
  } else if (v.isList() || v.isTuple()) {
    o.kind = v.isList() ? Observed::Kind::List : Observed::Kind::Tuple;
    if (v.isList())
      for (const c10::IValue& e : v.toListRef()) o.elems.push_back(observe(e));
    else
      for (const c10::IValue& e : v.toTupleRef().elements()) o.elems.push_back(observe(e));
  } else if (!v.isNone()) {
    o.kind = Observed::Kind::Other;
  }
  return o;
}

void Observed::merge(const Observed& o) {
  if (kind != o.kind) {
    if (kind == Kind::None) *this = o;  // Optional values: keep what we saw when present
    return;
  }
  if (kind == Kind::Tensor) {
    if (dtype == DType::Undefined) dtype = o.dtype;
    if (quantized && (o.qscale != qscale || o.qzero != qzero)) qvaries = true;
    if (sizes.size() != o.sizes.size()) {
      rank_known = false;
    } else {
      for (size_t i = 0; i < sizes.size(); ++i)
        if (sizes[i] != o.sizes[i]) sizes[i] = -1;
    }
  } else if (kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool) {
    if (!(first == o.first)) varies = true;
  } else if (kind == Kind::List || kind == Kind::Tuple) {
    if (elems.size() != o.elems.size()) {
      varies = true;
      return;
    }
    for (size_t i = 0; i < elems.size(); ++i) elems[i].merge(o.elems[i]);
  }
}

namespace {

// The recorder of the run in progress; profiling runs are serialised by a mutex.
struct Recorder {
  std::vector<const tj::Value*> ids;
  std::unordered_map<const tj::Value*, Observed>* obs = nullptr;
  std::vector<bool> seen_this_run;
};
Recorder* g_recorder = nullptr;
std::mutex g_mutex;

void register_record_op() {
  static std::once_flag once;
  std::call_once(once, [] {
    tj::registerOperator(tj::Operator(
        "t2o::record(Any x, int id) -> ()",
        [](tj::Stack& stack) {
          int64_t id = stack.back().toInt();
          c10::IValue v = stack[stack.size() - 2];
          stack.pop_back();
          stack.pop_back();
          if (!g_recorder) return;
          const tj::Value* val = g_recorder->ids.at(static_cast<size_t>(id));
          if (std::getenv("T2O_DEBUG_PROFILE")) std::cerr << "record %" << val->debugName() << " " << v.tagKind() << std::endl;
          Observed o = observe(v);
          auto it = g_recorder->obs->find(val);
          if (it == g_recorder->obs->end())
            g_recorder->obs->emplace(val, std::move(o));
          else
            it->second.merge(o);
        },
        c10::AliasAnalysisKind::CONSERVATIVE));
  });
}

// libtorch's RNN kernels trust their arguments: a hidden state whose batch differs from the input's
// (a traced model that fixed the batch, run at another one) reads out of bounds. Before each RNN op
// of a profiling run, t2o::check_rnn raises the error that PyTorch's module would have raised.
void register_rnn_check_op() {
  static std::once_flag once;
  std::call_once(once, [] {
    tj::registerOperator(tj::Operator(
        "t2o::check_rnn(Tensor x, Tensor? batch_sizes, Tensor[] hx, bool batch_first) -> ()",
        [](tj::Stack& stack) {
          bool batch_first = stack.back().toBool();
          auto hx = stack[stack.size() - 2].toTensorVector();
          c10::IValue bs = stack[stack.size() - 3];
          at::Tensor x = stack[stack.size() - 4].toTensor();
          for (int k = 0; k < 4; ++k) stack.pop_back();
          int64_t batch = -1;
          if (!bs.isNone()) {
            at::Tensor b = bs.toTensor().to(at::kLong).contiguous();
            TORCH_CHECK(b.dim() == 1 && b.numel() > 0, "packed sequence: batch_sizes must be a non-empty 1-D tensor");
            TORCH_CHECK(b.min().item<int64_t>() > 0 && (b.numel() < 2 || (b.slice(0, 1) <= b.slice(0, 0, -1)).all().item<bool>()),
                        "packed sequence: batch_sizes must be positive and non-increasing");
            TORCH_CHECK(x.dim() >= 1 && x.size(0) == b.sum().item<int64_t>(),
                        "packed sequence: ", x.size(0), " rows of data for batch sizes summing to ", b.sum().item<int64_t>());
            batch = b[0].item<int64_t>();
          } else if (x.dim() == 3) {
            batch = x.size(batch_first ? 0 : 1);
          }
          for (const at::Tensor& h : hx) {
            if (batch < 0) continue;  // unbatched input: the kernel checks 2-D states itself
            TORCH_CHECK(h.dim() == 3 && h.size(1) == batch, "RNN: expected a hidden state of batch ", batch,
                        ", got one of size ", h.sizes());
          }
        },
        c10::AliasAnalysisKind::CONSERVATIVE));
  });
}

void guard_rnns_in(tj::Block* block) {
  static const std::set<std::string> rnns{"aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu"};
  auto g = block->owningGraph();
  for (tj::Node* n : block->nodes()) {
    for (tj::Block* b : n->blocks()) guard_rnns_in(b);
    if (!rnns.count(n->kind().toQualString()) || n->inputs().size() < 3) continue;
    tj::WithInsertPoint guard(n);
    // Packed overloads: (data, batch_sizes, hx, ...); padded ones: (input, hx, ..., batch_first).
    bool lstm = n->kind().toQualString() == std::string("aten::lstm");
    bool packed = (lstm ? n->input(1) : n->input(2))->type()->cast<c10::TensorType>() != nullptr;
    tj::Value* hx = n->input(packed ? 2 : 1);
    if (hx->type()->cast<c10::TensorType>()) hx = g->insertNode(g->createList(c10::TensorType::get(), {hx}))->output();
    tj::Value* bs = packed ? n->input(1) : g->insertConstant(c10::IValue());
    bool bf = false;
    if (!packed) {
      auto iv = tj::toIValue(n->inputs().back());
      bf = iv && iv->isBool() && iv->toBool();
    }
    tj::Node* check = g->create(c10::Symbol::fromQualString("t2o::check_rnn"), 0);
    check->addInput(n->input(0));
    check->addInput(bs);
    check->addInput(hx);
    check->addInput(g->insertConstant(bf));
    g->insertNode(check);
  }
}

bool recordable(const tj::Value* v) {
  auto k = v->type()->kind();
  return k != c10::TypeKind::ClassType && k != c10::TypeKind::FunctionType && k != c10::TypeKind::NoneType &&
         k != c10::TypeKind::InterfaceType;
}

void instrument(tj::Block* block, std::vector<const tj::Value*>& ids, std::vector<tj::Node*>& added) {
  auto g = block->owningGraph();
  auto make = [&](tj::Value* v) {
    tj::Node* n = g->create(c10::Symbol::fromQualString("t2o::record"), 0);
    n->addInput(v);
    tj::Value* idv = g->insertConstant(static_cast<int64_t>(ids.size()));
    (void)idv;
    ids.push_back(v);
    added.push_back(n);
    return std::make_pair(n, idv);
  };
  std::vector<tj::Node*> nodes(block->nodes().begin(), block->nodes().end());
  // Block inputs (loop counters, carried values) are observed at the top of the block.
  tj::Node* anchor = block->param_node();
  for (tj::Value* in : block->inputs()) {
    if (!recordable(in)) continue;
    auto [rec, idv] = make(in);
    idv->node()->moveAfter(anchor);
    rec->addInput(idv);
    rec->insertAfter(idv->node());
    anchor = rec;
  }
  for (tj::Node* n : nodes) {
    for (tj::Block* b : n->blocks()) instrument(b, ids, added);
    tj::Node* after = n;
    for (tj::Value* out : n->outputs()) {
      if (!recordable(out)) continue;
      auto [rec, idv] = make(out);
      idv->node()->moveAfter(after);
      rec->addInput(idv);
      rec->insertAfter(idv->node());
      after = rec;
    }
  }
}

// A copy of `graph` to run, with a t2o::record after every value (ids: the recorded values of
// `graph`, by the id each record passes) and the conditions of the Ifs in `force` replaced by
// constants; `graph` itself is left as it was.
std::shared_ptr<tj::Graph> instrumented_copy(const std::shared_ptr<tj::Graph>& graph, std::vector<const tj::Value*>& ids,
                                             const std::vector<std::pair<tj::Node*, bool>>& force = {}) {
  register_record_op();
  std::vector<tj::Node*> added;
  instrument(graph->block(), ids, added);
  std::vector<std::pair<tj::Node*, tj::Value*>> saved;
  for (const auto& [n, cond] : force) {
    tj::WithInsertPoint guard(n);
    saved.emplace_back(n, n->input(0));
    n->replaceInput(0, graph->insertConstant(cond));
  }
  auto copy = graph->copy();
  guard_rnns(*copy);
  for (auto& [n, cond] : saved) {
    tj::Value* c = n->input(0);
    n->replaceInput(0, cond);
    if (!c->hasUses()) c->node()->destroy();
  }
  for (tj::Node* rec : added) {
    tj::Value* idv = rec->input(1);
    rec->removeAllInputs();
    rec->destroy();
    if (!idv->hasUses()) idv->node()->destroy();
  }
  return copy;
}

}  // namespace

void guard_rnns(tj::Graph& g) {
  register_rnn_check_op();
  guard_rnns_in(g.block());
}

std::vector<c10::IValue> Profile::run(const std::shared_ptr<tj::Graph>& graph, const std::vector<tj::Stack>& runs) {
  // The interpreter runs a copy, so map copied values back to ours through the id constants.
  std::vector<const tj::Value*> graph_ids;
  auto copy = instrumented_copy(graph, graph_ids);
  if (std::getenv("T2O_DEBUG_PROFILE")) std::cerr << *copy << std::endl;
  std::vector<c10::IValue> first;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto before = obs_;  // a run that fails leaves no observations behind
  Recorder rec{graph_ids, &obs_, {}};
  g_recorder = &rec;
  try {
    tj::Code code(copy, "t2o_profile");
    for (size_t r = 0; r < runs.size(); ++r) {
      tj::Stack stack = runs[r];
      tj::InterpreterState state(code);
      state.run(stack);
      if (r == 0) first = stack;
    }
  } catch (...) {
    g_recorder = nullptr;
    obs_ = std::move(before);
    throw;
  }
  g_recorder = nullptr;
  return first;
}

namespace {

// Whether anything defined in b (or in blocks inside it) was observed.
bool block_observed(const tj::Block* b, const std::unordered_map<const tj::Value*, Observed>& obs) {
  for (const tj::Value* in : b->inputs())
    if (obs.count(in)) return true;
  for (const tj::Node* n : b->nodes()) {
    for (const tj::Value* o : n->outputs())
      if (obs.count(o)) return true;
    for (const tj::Block* sb : n->blocks())
      if (block_observed(sb, obs)) return true;
  }
  return false;
}

bool has_recordable_values(const tj::Block* b) {
  for (const tj::Node* n : b->nodes()) {
    for (const tj::Value* o : n->outputs())
      if (recordable(o)) return true;
    for (const tj::Block* sb : n->blocks())
      if (has_recordable_values(sb)) return true;
  }
  return false;
}

bool raises(const tj::Block* b) {
  for (const tj::Node* n : b->nodes())
    if (n->kind() == c10::prim::RaiseException) return true;
  return false;
}

// Ifs with one branch observed and the other, which does not raise, never run: (node, branch to force).
void untaken(tj::Block* b, const std::unordered_map<const tj::Value*, Observed>& obs,
             std::vector<std::pair<tj::Node*, bool>>& out) {
  for (tj::Node* n : b->nodes()) {
    if (n->kind() == c10::prim::If && n->blocks().size() == 2) {
      bool then_seen = block_observed(n->blocks()[0], obs), else_seen = block_observed(n->blocks()[1], obs);
      for (int k = 0; k < 2; ++k) {
        const tj::Block* other = n->blocks()[static_cast<size_t>(k)];
        bool seen_this = k == 0 ? then_seen : else_seen, seen_other = k == 0 ? else_seen : then_seen;
        bool taken_if = obs.count(n->input(0)) || seen_other;
        // A None check's other branch unwraps a None: forcing it only fails.
        const auto cond_kind = n->input(0)->node()->kind();
        bool none_check = cond_kind == c10::aten::__is__ || cond_kind == c10::aten::__isnot__;
        if (!seen_this && taken_if && !none_check && !raises(other) && has_recordable_values(other))
          out.emplace_back(n, k == 0);
      }
    }
    for (tj::Block* sb : n->blocks()) untaken(sb, obs, out);
  }
}

// An observation as text (the forced run's child process sends them to the parent); read back it
// claims only its kind, dtype and rank: every size dynamic, every number varying.
void write_observed(std::ostream& os, const Observed& o) {
  os << static_cast<int>(o.kind) << ' ' << static_cast<int>(o.dtype) << ' ' << o.rank_known << ' ' << o.sizes.size()
     << ' ' << o.quantized << ' ' << static_cast<int>(o.qdtype) << ' ' << o.per_channel << ' ' << o.elems.size();
  for (const Observed& e : o.elems) {
    os << ' ';
    write_observed(os, e);
  }
}

bool read_observed(std::istream& is, Observed& o, int depth = 0) {
  int kind = 0, dtype = 0, qdtype = 0;
  bool rank_known = false, quantized = false, per_channel = false;
  size_t rank = 0, elems = 0;
  if (!(is >> kind >> dtype >> rank_known >> rank >> quantized >> qdtype >> per_channel >> elems)) return false;
  if (depth > 64 || rank > 64 || elems > (size_t{1} << 20)) return false;
  o.kind = static_cast<Observed::Kind>(kind);
  o.dtype = static_cast<DType>(dtype);
  o.rank_known = rank_known;
  o.sizes.assign(rank, -1);
  o.varies = true;
  o.quantized = quantized;
  o.qdtype = static_cast<DType>(qdtype);
  o.per_channel = per_channel;
  o.qvaries = true;
  o.elems.resize(elems);
  for (Observed& e : o.elems)
    if (!read_observed(is, e, depth + 1)) return false;
  return true;
}

}  // namespace

bool Profile::forced_run(const std::shared_ptr<tj::Graph>& graph, const tj::Stack& run,
                         const std::vector<std::pair<tj::Node*, bool>>& force) {
  std::vector<const tj::Value*> ids;
  auto copy = instrumented_copy(graph, ids, force);
  // A forced branch computes on values its condition was meant to rule out (an Optional that is
  // None, an index past the end): libtorch may crash or loop on them. The run happens in a child
  // process, on one thread, with a time limit; its observations come back through a pipe.
  int fds[2];
  if (::pipe(fds) != 0) return false;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return false;
  }
  if (pid == 0) {
    ::close(fds[0]);
    at::set_num_threads(1);
    std::unordered_map<const tj::Value*, Observed> forced;
    Recorder rec{ids, &forced, {}};
    g_recorder = &rec;
    bool ok = true;
    try {
      tj::Code code(copy, "t2o_profile_forced");
      tj::Stack stack = run;
      tj::InterpreterState state(code);
      state.run(stack);
    } catch (...) {
      ok = false;  // what ran before the failure stays observed
    }
    std::unordered_map<const tj::Value*, size_t> index;
    for (size_t i = 0; i < ids.size(); ++i) index.emplace(ids[i], i);
    std::ostringstream os;
    os << ok << '\n';
    for (const auto& [v, o] : forced) {
      os << index.at(v) << ' ';
      write_observed(os, o);
      os << '\n';
    }
    const std::string text = os.str();
    for (size_t at = 0; at < text.size();) {
      ssize_t w = ::write(fds[1], text.data() + at, text.size() - at);
      if (w <= 0) break;
      at += static_cast<size_t>(w);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[65536];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out || !WIFEXITED(status)) return false;
  std::istringstream is(text);
  bool ok = false;
  if (!(is >> ok)) return false;
  size_t id = 0;
  while (is >> id) {
    Observed o;
    if (id >= ids.size() || !read_observed(is, o)) break;
    if (!obs_.count(ids[id])) obs_.emplace(ids[id], std::move(o));
  }
  return ok;
}

int Profile::observe_untaken_branches(const std::shared_ptr<tj::Graph>& graph, const tj::Stack& run) {
  // Ifs forced before stay unobserved when their run failed; they are not forced again.
  std::vector<std::pair<tj::Node*, bool>> force;
  untaken(graph->block(), obs_, force);
  force.erase(std::remove_if(force.begin(), force.end(), [&](const auto& f) { return forced_before_.count(f.first); }),
              force.end());
  if (force.empty()) return 0;
  // An If inside a branch forced before runs only when that branch is forced again.
  auto with_ancestors = [&](std::vector<std::pair<tj::Node*, bool>> fs) {
    std::set<tj::Node*> have;
    for (const auto& f : fs) have.insert(f.first);
    for (size_t i = 0; i < fs.size(); ++i)
      for (tj::Block* b = fs[i].first->owningBlock(); b && b->owningNode(); b = b->owningNode()->owningBlock()) {
        tj::Node* up = b->owningNode();
        auto it = forced_before_.find(up);
        if (it != forced_before_.end() && !have.count(up)) {
          fs.emplace_back(up, it->second);
          have.insert(up);
        }
      }
    return fs;
  };
  for (const auto& f : force) forced_before_[f.first] = f.second;
  // All at once; when that run fails (a forced branch computes something the rest cannot use),
  // each If still unobserved alone, the first 32.
  const bool debug = std::getenv("T2O_DEBUG_PROFILE") != nullptr;
  bool all = forced_run(graph, run, with_ancestors(force));
  if (debug) std::cerr << "forced " << force.size() << " Ifs together: " << (all ? "ran" : "failed") << std::endl;
  if (all) return static_cast<int>(force.size());
  int n = 0;
  for (const auto& f : force) {
    if (n++ == 32) break;
    if (block_observed(f.first->blocks()[f.second ? 0 : 1], obs_)) continue;
    bool one = forced_run(graph, run, with_ancestors({f}));
    if (debug) {
      const auto& r = f.first->sourceRange();
      std::string where = "?";
      if (r.source() && r.source()->filename())
        where = *r.source()->filename() + ":" + std::to_string(r.source()->lineno_for_offset(r.start()) + 1);
      std::cerr << "forced the If at " << where << ": " << (one ? "ran" : "failed") << std::endl;
    }
  }
  return static_cast<int>(force.size());
}

const Observed* Profile::get(const tj::Value* v) const {
  auto it = obs_.find(v);
  return it == obs_.end() ? nullptr : &it->second;
}

}  // namespace t2o
