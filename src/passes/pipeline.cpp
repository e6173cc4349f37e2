// Runs the passes to a fixed point and proves the result. The proof is cheap when nothing is
// wrong: the reference runs once per sample and the final model once per sample. Only when the
// final model differs does it bisect: over the pass applications (each kept as a snapshot) to
// the first one that breaks the outputs, then over that application's rewrites to the first bad
// rewrite, whose node is named. The pass is rolled back for the whole model, and the pipeline
// runs again without it.
#include <chrono>
#include <optional>
#include <set>
#include <unordered_map>

#include "onnx/check.h"
#include "passes/graph_util.h"
#include "passes/internal.h"
#include "passes/prove.h"

namespace t2o {

namespace passes {

int64_t count_nodes(const Graph& g) {
  int64_t n = 0;
  g.for_each_node([&](const Node&) { ++n; });
  return n;
}

int64_t initializer_bytes(const Graph& g) { return g.parameter_bytes(); }

}  // namespace passes

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

constexpr int kMaxRounds = 4;

struct Application {
  size_t pass;   // index into the pipeline
  int rewrites;
};

struct PipelineRun {
  Model result;
  std::vector<Model> snapshots;  // snapshots[0]: the input; snapshots[i + 1]: after apps[i]
  std::vector<Application> apps;
};

PipelineRun run_pipeline(const Model& input, const std::vector<const Pass*>& pipeline, const std::set<size_t>& disabled,
                         std::vector<PassStats>& stats, const std::function<void(const std::string&)>& progress) {
  PipelineRun r;
  r.result = passes::deep_copy(input);
  r.snapshots.push_back(passes::deep_copy(input));
  // Types of r.result as it is now, from the last pass that inferred them and rewrote nothing.
  std::optional<std::unordered_map<std::string, Type>> known;
  for (int round = 0; round < kMaxRounds; ++round) {
    bool changed = false;
    for (size_t i = 0; i < pipeline.size(); ++i) {
      if (disabled.count(i)) continue;
      if (progress)
        progress("optimizing: round " + std::to_string(round + 1) + ", pass " + std::to_string(i + 1) + " of " +
                 std::to_string(pipeline.size()) + " (" + pipeline[i]->name + ")");
      auto t0 = Clock::now();
      PassContext ctx(r.result);
      if (known) ctx.start_from_types(*known);
      int n = pipeline[i]->run(r.result, ctx);
      stats[i].ms += ms_since(t0);
      if (n <= 0) {
        if (!known && ctx.inferred_types()) known = *ctx.inferred_types();
        continue;
      }
      known.reset();
      stats[i].runs += 1;
      stats[i].rewrites += n;
      r.apps.push_back({i, n});
      r.snapshots.push_back(passes::deep_copy(r.result));
      changed = true;
    }
    if (!changed) break;
  }
  return r;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

// Why the model is not acceptable: it fails the checker (when the input passed it) or the proof.
struct Verdict {
  bool ok = true;
  passes::Finding finding;
};

class Judge {
 public:
  Judge(const Model& input, const passes::Prover* prover, double& verify_ms) : prover_(prover), verify_ms_(verify_ms) {
    try {
      check_model(passes::strip_large_initializers(input));
      check_ = true;
    } catch (const std::exception&) {
      check_ = false;  // the input itself is not valid ONNX: validity is not ours to keep
    }
  }
  Verdict operator()(const Model& m) const {
    Verdict v;
    if (check_) {
      try {
        check_model(passes::strip_large_initializers(m));
      } catch (const std::exception& e) {
        v.ok = false;
        v.finding.problem = "made the model fail the ONNX checker: " + one_line(e.what());
        return v;
      }
    }
    if (prover_) {
      auto t0 = Clock::now();
      auto f = prover_->check(m);
      verify_ms_ += ms_since(t0);
      if (f) {
        v.ok = false;
        v.finding = *f;
      }
    }
    return v;
  }

 private:
  const passes::Prover* prover_;
  double& verify_ms_;
  bool check_ = false;
};

std::string format_max_abs(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

}  // namespace

OptimizeReport optimize(Model& m, const OptimizeOptions& o) {
  auto t_start = Clock::now();
  OptimizeReport rep;
  rep.nodes_before = passes::count_nodes(m.graph);
  rep.initializer_bytes_before = passes::initializer_bytes(m.graph);
  auto warn = [&](const std::string& w) {
    rep.warnings.push_back(w);
    if (o.warn) o.warn(w);
  };

  std::vector<const Pass*> pipeline;
  if (!o.passes.empty()) {
    std::set<std::string> want(o.passes.begin(), o.passes.end());
    for (const std::string& name : want)
      if (!find_pass(name))
        throw Error("unknown pass '" + name + "'", "run 'torch2onnx optimize --help' for the list of passes", kExitUsage);
    for (const Pass& p : builtin_passes())
      if (want.count(p.name)) pipeline.push_back(&p);
  } else {
    for (const Pass& p : builtin_passes())
      if (p.level <= o.level) pipeline.push_back(&p);
  }
  for (const Pass& p : o.extra_passes) pipeline.push_back(&p);
  rep.passes.resize(pipeline.size());
  for (size_t i = 0; i < pipeline.size(); ++i) rep.passes[i].name = pipeline[i]->name;

  auto finish = [&] {
    rep.nodes_after = passes::count_nodes(m.graph);
    rep.initializer_bytes_after = passes::initializer_bytes(m.graph);
    rep.total_ms = ms_since(t_start);
    if (o.progress) o.progress("");
    return rep;
  };
  if (pipeline.empty()) return finish();

  std::optional<passes::Prover> prover;
  if (o.verify) {
    auto t0 = Clock::now();
    if (o.progress) o.progress("optimizing: running the model on its proof inputs");
    prover.emplace(m, o);
    rep.verify_ms += ms_since(t0);
    if (!prover->unusable().empty()) {
      rep.not_verified = prover->unusable();
      warn("cannot prove the optimization: " + rep.not_verified + "; the model is left unoptimized");
      return finish();
    }
    rep.samples = prover->samples();
  }
  Judge judge(m, prover ? &*prover : nullptr, rep.verify_ms);

  std::set<size_t> disabled;
  while (true) {
    for (auto& s : rep.passes) s.runs = 0, s.rewrites = 0;
    PipelineRun run = run_pipeline(m, pipeline, disabled, rep.passes, o.progress);
    if (o.progress && prover && !run.apps.empty()) o.progress("optimizing: proving the result on the runtime");
    Verdict final_verdict = run.apps.empty() ? Verdict{} : judge(run.result);
    if (final_verdict.ok) {
      m = std::move(run.result);
      rep.verified = prover.has_value();
      return finish();
    }
    // The first application after which the model is no longer acceptable.
    if (o.progress) o.progress("optimizing: a pass changed the outputs; finding which one");
    size_t lo = 0, hi = run.apps.size();  // snapshots[lo] is good, snapshots[hi] is bad
    Verdict bad = final_verdict;
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      Verdict v = judge(run.snapshots[mid]);
      if (v.ok) lo = mid;
      else hi = mid, bad = v;
    }
    const Application& app = run.apps[hi - 1];
    const Pass& pass = *pipeline[app.pass];
    // The first rewrite of that application that breaks it.
    std::string node;
    int64_t good = 0, bad_at = app.rewrites;
    std::vector<std::string> anchors;
    while (bad_at - good > 1) {
      int64_t mid = (good + bad_at) / 2;
      Model trial = passes::deep_copy(run.snapshots[hi - 1]);
      PassContext ctx(trial, mid);
      pass.run(trial, ctx);
      if (judge(trial).ok) good = mid;
      else bad_at = mid;
    }
    {
      Model trial = passes::deep_copy(run.snapshots[hi - 1]);
      PassContext ctx(trial, bad_at);
      pass.run(trial, ctx);
      if (!ctx.anchors().empty()) node = ctx.anchors().back();
    }
    Rollback rb;
    rb.pass = pass.name;
    rb.output = bad.finding.output;
    rb.max_abs = bad.finding.max_abs;
    rb.node = node;
    std::string at = node.empty() ? "" : " at node " + node;
    if (!rb.output.empty())
      rb.message = "pass " + pass.name + " changed output '" + rb.output + "' (max abs " + format_max_abs(rb.max_abs) +
                   (bad.finding.problem.empty() ? "" : ", " + bad.finding.problem) + ")" + at + "; rolled back";
    else
      rb.message = "pass " + pass.name + " " + bad.finding.problem + at + "; rolled back";
    warn(rb.message);
    rep.rollbacks.push_back(rb);
    rep.passes[app.pass].rolled_back = true;
    disabled.insert(app.pass);
  }
}

OptimizeReport optimize_converted(Model& m, const std::map<std::string, Dims>& input_sizes,
                                  const std::map<std::string, Tensor>& input_data,
                                  const std::function<void(const std::string&)>& warn,
                                  const std::function<void(const std::string&)>& progress) {
  OptimizeOptions o;
  o.verify = true;
  o.input_sizes = input_sizes;
  o.input_data = input_data;
  o.warn = warn;
  o.progress = progress;
  return optimize(m, o);
}

}  // namespace t2o
