// End-to-end: every fixture from tests/models converts at opsets 9-13 and 17, passes the onnx
// checker, and ONNX Runtime reproduces PyTorch's outputs from the converted file; at opsets 11 and
// 17 `verify` (PyTorch against the t2o runtime, two samples of fresh inputs) passes too. Below a
// fixture's min_opset the conversion must fail with exit 3, naming the op, its source line and the
// opset it needs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "onnx/check.h"
#include "onnx/model_io.h"
#include "onnx/tensor_io.h"
#include "passes/passes.h"
#include "torch/convert.h"
#include "torch/inspect_torch.h"
#include "verify/verify.h"

namespace fs = std::filesystem;
using namespace t2o;

namespace {

std::string fixture_dir() {
  const char* e = std::getenv("T2O_TORCH_FIXTURES");
  return e ? e : T2O_TORCH_FIXTURES;
}

// Scratch space of this process: ctest runs shards of the suite in parallel, and they must not
// see (or delete) each other's files.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("t2o_e2e_" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    if (!std::getenv("T2O_E2E_KEEP")) fs::remove_all(dir, ec);
  }
};
fs::path scratch_dir() {
  static Scratch s;
  return s.dir;
}

struct Spec {
  ConvertOptions opts;
  double rtol = 1e-3, atol = 1e-4;
  int min_opset = 9;
  std::string min_opset_op, min_opset_source;  // the op that needs min_opset, and its "file.py:LINE"
  int expect_exit = 0;
  std::string expect_text;
  bool data = false;  // shape learning on the saved inputs (convert --data)
};

Dims parse_dims(const std::string& s) {
  Dims d;
  if (s == "scalar") return d;
  std::stringstream ss(s);
  std::string p;
  while (std::getline(ss, p, 'x')) d.push_back(std::stoll(p));
  return d;
}

Spec read_spec(const std::string& dir) {
  Spec s;
  std::ifstream f(dir + "/spec.txt");
  std::string line;
  while (std::getline(f, line)) {
    std::stringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "input") {
      std::string name, dims, dt;
      ls >> name >> dims >> dt;
      s.opts.inputs.push_back({name, parse_dims(dims), dtype_from_name(dt)});
    } else if (kind == "dynamic") {
      std::string v;
      ls >> v;  // NAME:AXIS=LABEL[,AXIS=LABEL]
      auto colon = v.find(':');
      DynamicSpec d{v.substr(0, colon), {}};
      std::stringstream items(v.substr(colon + 1));
      for (std::string item; std::getline(items, item, ',');) {
        auto eq = item.find('=');
        d.axes[std::stoi(item.substr(0, eq))] = item.substr(eq + 1);
      }
      s.opts.dynamic.push_back(d);
    } else if (kind == "data") {
      s.data = true;
    } else if (kind == "tol") {
      ls >> s.rtol >> s.atol;
    } else if (kind == "min_opset") {
      ls >> s.min_opset >> s.min_opset_op >> s.min_opset_source;
    } else if (kind == "expect_error") {
      ls >> s.expect_exit;
      std::getline(ls, s.expect_text);
      if (!s.expect_text.empty() && s.expect_text[0] == ' ') s.expect_text.erase(0, 1);
    }
  }
  return s;
}

std::vector<std::string> fixture_names() {
  std::vector<std::string> r;
  std::ifstream f(fixture_dir() + "/index.txt");
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) r.push_back(line);
  if (r.empty()) r.push_back("MISSING_FIXTURES");
  return r;
}

struct Param {
  std::string name;
  int opset;
};

void PrintTo(const Param& p, std::ostream* os) { *os << p.name << "@opset" << p.opset; }

// Opsets 9-13 and 17, plus a fixture's min_opset when it lies between, so that one converts too.
std::vector<Param> params() {
  std::vector<Param> r;
  for (const auto& n : fixture_names()) {
    std::set<int> opsets{9, 10, 11, 12, 13, 17};
    opsets.insert(read_spec(fixture_dir() + "/" + n).min_opset);
    for (int o : opsets) r.push_back({n, o});
  }
  return r;
}

class E2E : public ::testing::TestWithParam<Param> {};

// Converts (or checks the expected failure); returns the saved model path or "" when done.
// The fixture's options at an opset; with `data`, shape learning runs on the saved inputs.
ConvertOptions options_for(const Param& p, const Spec& spec) {
  std::string dir = fixture_dir() + "/" + p.name;
  ConvertOptions o = spec.opts;
  o.opset = p.opset;
  if (spec.data)
    for (size_t k = 0; k < o.inputs.size(); ++k)
      o.data[o.inputs[k].name] = read_npy(dir + "/input_" + std::to_string(k) + ".npy");
  return o;
}

std::string convert_fixture(const Param& p, const Spec& spec) {
  std::string dir = fixture_dir() + "/" + p.name;
  ConvertOptions o = options_for(p, spec);
  if (spec.expect_exit) {
    try {
      convert_torchscript(dir + "/model.pt", o);
      ADD_FAILURE() << "expected conversion to fail";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), spec.expect_exit) << e.what();
      EXPECT_NE(std::string(e.what()).find(spec.expect_text), std::string::npos) << e.what();
    }
    return {};
  }
  ConvertResult r = convert_torchscript(dir + "/model.pt", o);
  // As `torch2onnx convert` does: the optimizer runs, proven on the runtime.
  std::map<std::string, Dims> sizes;
  for (const auto& in : o.inputs) sizes[in.name] = in.dims;
  OptimizeReport opt = optimize_converted(r.model, sizes, o.data, {});
  EXPECT_TRUE(opt.rollbacks.empty()) << p.name << ": " << opt.rollbacks.front().message;
  check_model(r.model);
  fs::path out = scratch_dir() / (p.name + "_" + std::to_string(p.opset) + ".onnx");
  save_model(r.model, out.string());
  return out.string();
}

// ONNX Runtime in one node process for the whole run (tests/interop/ort_run.js --serve): a
// request is "MODEL<TAB>IN_DIR<TAB>OUT_DIR", the answer "ok" or "error MESSAGE".
class OrtServer {
 public:
  ~OrtServer() { close(); }
  // "" when ONNX Runtime wrote the outputs, else why not.
  std::string run(const std::string& model, const std::string& in_dir, const std::string& out_dir) {
    if (pid_ <= 0 && !start()) return "cannot start node " + std::string(T2O_ORT_RUN);
    std::string req = model + "\t" + in_dir + "\t" + out_dir + "\n";
    if (::write(to_, req.data(), req.size()) != static_cast<ssize_t>(req.size())) return stop("node stopped reading");
    char buf[4096];
    std::string line;
    while (std::fgets(buf, sizeof buf, from_)) {
      line += buf;
      if (!line.empty() && line.back() == '\n') break;
    }
    if (line.empty() || line.back() != '\n') return stop("node exited without an answer");
    line.pop_back();
    return line == "ok" ? "" : line;
  }

 private:
  bool start() {
    int in[2], out[2];
    if (::pipe(in) != 0) return false;
    if (::pipe(out) != 0) return ::close(in[0]), ::close(in[1]), false;
    pid_ = ::fork();
    if (pid_ < 0) {
      for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
      return false;
    }
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
      ::execlp("node", "node", T2O_ORT_RUN, "--serve", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = ::fdopen(out[0], "r");
    ::signal(SIGPIPE, SIG_IGN);  // a server that died shows as a failed write, not a dead test
    return from_ != nullptr;
  }
  // Ends the server: its stdin closes, so it finishes and exits.
  void close() {
    if (to_ >= 0) ::close(to_);
    if (from_) std::fclose(from_);
    int status = 0;
    if (pid_ > 0) ::waitpid(pid_, &status, 0);
    pid_ = -1, to_ = -1, from_ = nullptr;
  }
  std::string stop(const std::string& why) {
    close();
    return why;
  }
  pid_t pid_ = -1;
  int to_ = -1;
  FILE* from_ = nullptr;
};

OrtServer& ort_server() {
  static OrtServer s;
  return s;
}

void expect_close(const Tensor& want, const Tensor& got, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(want.dims(), got.dims()) << what << ": shape";
  int64_t bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = want.as_double(i), b = got.as_double(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    double err = std::fabs(a - b);
    if (err > atol + rtol * std::fabs(a)) ++bad, worst = std::max(worst, err);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.numel() << " elements differ, worst |diff| " << worst;
}

// ONNX Runtime runs the converted file on the inputs the model was converted with, then (for
// dynamic fixtures) on inputs at other sizes, and must reproduce PyTorch's outputs.
void expect_onnx_runtime_matches(const Param& p, const Spec& spec, const std::string& path) {
  std::string dir = fixture_dir() + "/" + p.name;
  for (const std::string& in_dir : {dir, dir + "/alt"}) {
    if (!fs::exists(in_dir + "/input_0.npy")) continue;
    std::string tag = in_dir == dir ? "" : " (alt sizes)";
    fs::path out_dir = scratch_dir() / ("ort_" + p.name + "_" + std::to_string(p.opset));
    fs::remove_all(out_dir);
    std::string err = ort_server().run(path, in_dir, out_dir.string());
    ASSERT_EQ(err, "") << "ONNX Runtime on " << path << tag;
    for (int k = 0; fs::exists(in_dir + "/output_" + std::to_string(k) + ".npy"); ++k) {
      std::string f = "/output_" + std::to_string(k) + ".npy";
      ASSERT_TRUE(fs::exists(out_dir.string() + f)) << "ONNX Runtime gave fewer outputs than PyTorch" << tag;
      expect_close(read_npy(in_dir + f), read_npy(out_dir.string() + f), spec.rtol, spec.atol,
                   "output " + std::to_string(k) + tag);
    }
    fs::remove_all(out_dir);
  }
}

// `verify` as `torch2onnx verify MODEL.pt FILE --samples 2 --input ...` runs it: fresh inputs from
// the fixture's sizes (and its saved inputs for fixtures whose shapes depend on values).
void expect_verify_passes(const Param& p, const Spec& spec, const std::string& path) {
  std::string dir = fixture_dir() + "/" + p.name;
  VerifyOptions v;
  v.inputs = spec.opts.inputs;
  v.samples = 2;
  v.tol = {spec.rtol, spec.atol};
  if (spec.data)
    for (size_t k = 0; k < v.inputs.size(); ++k) v.data[v.inputs[k].name] = dir + "/input_" + std::to_string(k) + ".npy";
  v.warn = [](const std::string&) {};
  try {
    VerifyReport r = verify_model(dir + "/model.pt", path, v);
    EXPECT_TRUE(r.ok()) << format_report(r);
  } catch (const Error& e) {
    FAIL() << "verify: exit " << e.exit_code() << ": " << e.what();
  }
}

TEST_P(E2E, ConvertsAndMatchesOnnxRuntime) {
  const Param& p = GetParam();
  ASSERT_NE(p.name, "MISSING_FIXTURES") << "no fixtures in " << fixture_dir();
  Spec spec = read_spec(fixture_dir() + "/" + p.name);
  if (p.opset < spec.min_opset && !spec.expect_exit) {
    ASSERT_FALSE(spec.min_opset_op.empty() || spec.min_opset_source.empty()) << "spec.txt: min_opset N OP FILE:LINE";
    // The report lists one line per op: "OP at FILE:LINE: WHAT needs opset >= N".
    std::string want = "\n  " + spec.min_opset_op + " at " + spec.min_opset_source + ": ";
    std::string need = " needs opset >= " + std::to_string(spec.min_opset);
    try {
      convert_torchscript(fixture_dir() + "/" + p.name + "/model.pt", options_for(p, spec));
      FAIL() << "converted at opset " << p.opset << " though the fixture needs " << spec.min_opset;
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(e.exit_code(), 3) << msg;
      size_t at = msg.find(want);
      ASSERT_NE(at, std::string::npos) << "no line for " << want.substr(3) << " in:\n" << msg;
      size_t eol = std::min(msg.find('\n', at + 1), msg.size());
      std::string line = msg.substr(at + 1, eol - at - 1);
      EXPECT_TRUE(line.size() >= need.size() && line.compare(line.size() - need.size(), need.size(), need) == 0)
          << line;
    }
    return;
  }
  std::string path;
  try {
    path = convert_fixture(p, spec);
  } catch (const Error& e) {
    FAIL() << "exit " << e.exit_code() << ": " << e.what() << "\nhint: " << e.hint();
  }
  if (path.empty()) return;
  expect_onnx_runtime_matches(p, spec, path);
  if (p.opset == 11 || p.opset == 17) expect_verify_passes(p, spec, path);
  if (!std::getenv("T2O_E2E_KEEP")) fs::remove(path);
}


// After inlining, a node's own range is torch's conv.py; doc_strings must name the user's file.
TEST(E2ESource, ConvDocStringNamesFixtureFile) {
  std::string dir = fixture_dir() + "/cnn_script";
  if (!fs::exists(dir + "/model.pt")) GTEST_SKIP() << "no cnn_script fixture";
  ConvertOptions o = read_spec(dir).opts;
  ConvertResult r = convert_torchscript(dir + "/model.pt", o);
  int convs = 0;
  for (const Node& n : r.model.graph.nodes) {
    if (n.op_type != "Conv") continue;
    ++convs;
    EXPECT_EQ(n.doc_string.rfind("zoo_basic.py:", 0), 0u) << n.doc_string;
  }
  EXPECT_GT(convs, 0);
}

// A file saved by PyTorch 2 (aten::scaled_dot_product_attention) loads for inspect as for convert.
TEST(E2ESource, PyTorch2FileInspects) {
  std::string dir = fixture_dir() + "/op_sdpa_torch2";
  if (!fs::exists(dir + "/model.pt")) GTEST_SKIP() << "no op_sdpa_torch2 fixture";
  TorchFileReport r = inspect_torch_file(dir + "/model.pt");
  ASSERT_EQ(r.forward_args.size(), 4u);
  EXPECT_EQ(r.forward_args[0], "q: Tensor");
}

// A dynamic output dim that follows a dynamic input dim carries its label, not NAME_dimK.
TEST(E2ESource, DynamicOutputDimsTakeInputLabels) {
  std::string dir = fixture_dir() + "/rnn_lstm_bidir";
  if (!fs::exists(dir + "/model.pt")) GTEST_SKIP() << "no rnn_lstm_bidir fixture";
  ConvertResult r = convert_torchscript(dir + "/model.pt", read_spec(dir).opts);
  ASSERT_EQ(r.model.graph.outputs.size(), 3u);
  const auto& y = r.model.graph.outputs[0].type.shape;  // [batch, seq, 2*hidden]
  ASSERT_TRUE(y && y->dims.size() == 3);
  EXPECT_EQ(y->dims[0].symbol, "batch");
  EXPECT_EQ(y->dims[1].symbol, "seq");
  const auto& h = r.model.graph.outputs[1].type.shape;  // [layers*dirs, batch, hidden]
  ASSERT_TRUE(h && h->dims.size() == 3);
  EXPECT_EQ(h->dims[1].symbol, "batch");
}

std::vector<std::string> output_names(const std::string& fixture) {
  std::string dir = fixture_dir() + "/" + fixture;
  ConvertResult r = convert_torchscript(dir + "/model.pt", read_spec(dir).opts);
  std::vector<std::string> names;
  for (const auto& o : r.model.graph.outputs) names.push_back(o.name);
  return names;
}

// Dict values are outputs named by their string keys, when each key names one output.
TEST(E2ESource, DictOutputsTakeTheirKeys) {
  for (const char* f : {"dict_seg_out", "dict_detections", "dict_two_images", "dict_int_keys"})
    if (!fs::exists(fixture_dir() + "/" + f + "/model.pt")) GTEST_SKIP() << "no " << f << " fixture";
  using V = std::vector<std::string>;
  EXPECT_EQ(output_names("dict_seg_out"), (V{"out", "aux"}));
  EXPECT_EQ(output_names("dict_detections"), (V{"scores", "labels"}));
  EXPECT_EQ(output_names("dict_two_images"), (V{"output.0", "output.1", "output.2", "output.3"}));
  EXPECT_EQ(output_names("dict_int_keys"), (V{"output.0", "output.1", "output.2"}));
  std::string dir = fixture_dir() + "/dict_seg_out";
  ConvertResult r = convert_torchscript(dir + "/model.pt", read_spec(dir).opts);
  const auto& s = r.model.graph.outputs[0].type.shape;  // [batch, 4, h, w]; h and w are both 16
  ASSERT_TRUE(s && s->dims.size() == 4);
  EXPECT_EQ(s->dims[0].symbol, "batch");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, E2E, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return i.param.name + "_" + std::to_string(i.param.opset);
                         });

}  // namespace
