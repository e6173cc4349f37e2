// `torch2onnx verify` end to end, through the command line users run: agreeing models pass,
// models broken on purpose fail and --locate names the broken node and its source line.
#include "verify_support.h"

namespace {

// Verify must fail, and --locate must name `node` (and `source`, when given).
void expect_located(const std::string& model, const std::string& onnx, const std::string& node,
                    const std::string& source, const std::string& tag) {
  fs::path js = work_dir() / ("report_" + tag + ".json");
  CliRun r = cli("verify " + model + " " + onnx + " --locate --json " + js.string());
  EXPECT_EQ(r.code, 1) << r.out;
  json j = read_json(js);
  EXPECT_FALSE(j["ok"].get<bool>());
  ASSERT_TRUE(j["locate"]["found"].get<bool>()) << r.out;
  EXPECT_TRUE(j["locate"]["intermediates"].get<bool>()) << r.out;
  EXPECT_EQ(j["locate"]["node"]["name"], node) << r.out;
  if (!source.empty()) {
    EXPECT_EQ(j["locate"]["node"]["source"], source) << r.out;
  }
  EXPECT_NE(r.out.find("first diverging node"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'" + node + "'"), std::string::npos) << r.out;
}


}  // namespace

TEST(VerifyE2E, AgreeingModelPasses) {
  std::string onnx = cnn();
  fs::path js = work_dir() / "ok.json";
  CliRun r = cli("verify " + fixtures() + "/cnn/model.pt " + onnx + " --samples 3 --locate --json " + js.string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("OK: all outputs agree in 3 sample(s)"), std::string::npos) << r.out;
  json j = read_json(js);
  EXPECT_TRUE(j["ok"].get<bool>());
  ASSERT_EQ(j["samples"].size(), 3u);
  // Each sample moves the dynamic batch size.
  EXPECT_NE(j["samples"][0]["inputs"][0]["shape"][0], j["samples"][1]["inputs"][0]["shape"][0]);
  EXPECT_FALSE(j["locate"]["found"].get<bool>()) << r.out;
  EXPECT_GT(j["locate"]["compared"].get<int>(), 5) << r.out;
}

TEST(VerifyE2E, ConvertWithVerifyFlag) {
  fs::path out = work_dir() / "cnn_flag.onnx";
  CliRun r = cli("convert " + fixtures() + "/cnn/model.pt -o " + out.string() + " --input x:1x3x6x6 --verify");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("OK: all outputs agree"), std::string::npos) << r.out;
}

// Long work shows a status line on a terminal (script(1) gives the CLI one) and nothing otherwise.
TEST(VerifyE2E, ProgressOnlyOnATerminal) {
  fs::path out = work_dir() / "cnn_progress.onnx";
  std::string args = "convert " + fixtures() + "/cnn/model.pt -o " + out.string() +
                     " --input x:1x3x6x6 --dynamic x:0=batch --verify";
  CliRun piped = cli(args);
  ASSERT_EQ(piped.code, 0) << piped.out;
  EXPECT_EQ(piped.out.find('\r'), std::string::npos) << piped.out;
  EXPECT_EQ(piped.out.find("learning shapes"), std::string::npos) << piped.out;

  fs::path log = work_dir() / "tty.txt";
  std::string cmd = "script -qec '" + std::string(T2O_CLI) + " " + args + "' " + log.string() + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(log);
  std::string tty = read_text(log);
  for (const char* stage : {"learning shapes: run 1", "learning shapes: run 2", "converting to ONNX", "optimizing: round 1",
                            "optimizing: proving", "verifying: sample 1 of"})
    EXPECT_NE(tty.find(stage), std::string::npos) << stage << "\n" << tty;
  // Every status line is cleared before the results are printed.
  size_t ok = tty.find("OK: all outputs agree");
  ASSERT_NE(ok, std::string::npos) << tty;
  size_t last_clear = tty.rfind("\r\x1b[K", ok);
  ASSERT_NE(last_clear, std::string::npos) << tty;
  std::string between = tty.substr(last_clear + 4, ok - last_clear - 4);
  EXPECT_EQ(between.find("verifying"), std::string::npos) << between;
}

// A traced model whose ops run inside torch's own modules (nn.ReLU in an nn.Sequential in a user
// block): each node names the submodule it came from and the user's line that called into torch,
// not torch's functional.py; --locate reports both.
TEST(VerifyE2E, TracedNodesNameModuleAndUserLine) {
  std::string onnx = converted("nested", "--input x:1x3x8x8");
  std::string line = tag_lines("nested").at("block");
  Model m = load_model(onnx);
  std::vector<std::string> relus;
  for (const Node& n : m.graph.nodes)
    if (n.op_type == "Relu") relus.push_back(n.doc_string);
  ASSERT_EQ(relus.size(), 2u);
  EXPECT_EQ(relus[0], line + " aten::relu in blocks.0.body.2");
  EXPECT_EQ(relus[1], line + " aten::relu in blocks.1.body.2");
  int seen = 0;
  auto [bad, node] = broken(
      onnx, "nested_relu", [&](const Node& n) { return n.op_type == "Relu" && ++seen == 2; },
      [](Model&, Node& n) { n.op_type = "Sigmoid"; });
  fs::path js = work_dir() / "nested.json";
  CliRun r = cli("verify " + fixtures() + "/nested/model.pt " + bad + " --locate --json " + js.string());
  EXPECT_EQ(r.code, 1) << r.out;
  json j = read_json(js);
  ASSERT_TRUE(j["locate"]["found"].get<bool>()) << r.out;
  EXPECT_EQ(j["locate"]["node"]["name"], node) << r.out;
  EXPECT_EQ(j["locate"]["node"]["module"], "blocks.1.body.2") << r.out;
  EXPECT_EQ(j["locate"]["node"]["source"], line) << r.out;
  EXPECT_NE(r.out.find("from aten::relu in blocks.1.body.2 at " + line), std::string::npos) << r.out;
}

TEST(VerifyE2E, LocatesAChangedWeight) {
  int convs = 0;
  auto [onnx, node] = broken(
      cnn(), "weight", [&](const Node& n) { return n.op_type == "Conv" && ++convs == 2; },
      [](Model& m, Node& n) {
        for (Initializer& i : m.graph.initializers)
          if (i.name == n.inputs[1]) {
            i.tensor = i.tensor.clone();
            i.tensor.data<float>()[0] += 0.5f;
          }
      });
  Model m = load_model(onnx);
  std::string doc;
  for (const Node& n : m.graph.nodes)
    if (n.name == node) doc = n.doc_string;
  expect_located(fixtures() + "/cnn/model.pt", onnx, node, parse_node_origin(doc).source, "weight");
}

TEST(VerifyE2E, LocatesASwappedActivation) {
  std::string line = tag_lines("cnn").at("relu");
  auto [onnx, node] = broken(
      cnn(), "relu", [&](const Node& n) { return n.op_type == "Relu" && starts_with(n.doc_string, line + " "); },
      [](Model&, Node& n) { n.op_type = "Sigmoid"; });
  expect_located(fixtures() + "/cnn/model.pt", onnx, node, line, "relu");
}

TEST(VerifyE2E, LocatesAChangedTransposePerm) {
  std::string line = tag_lines("cnn").at("permute");
  auto [onnx, node] = broken(
      cnn(), "perm", [&](const Node& n) { return n.op_type == "Transpose" && starts_with(n.doc_string, line + " "); },
      // N,H,W,C -> N,W,H,C: the same shape (H == W), other values.
      [](Model&, Node& n) { n.set_attr(Attribute::make_ints("perm", {0, 3, 2, 1})); });
  expect_located(fixtures() + "/cnn/model.pt", onnx, node, line, "perm");
}

TEST(VerifyE2E, EmbeddingGetsIndicesInRange) {
  std::string onnx = converted("embed", "--input tokens:1x6:i64 --dynamic tokens:1=seq");
  CliRun r = cli("verify " + fixtures() + "/embed/model.pt " + onnx + " --samples 4");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(VerifyE2E, NanOnBothSidesAgrees) {
  std::string onnx = converted("nan", "--input x:4x5");
  fs::path js = work_dir() / "nan.json";
  CliRun r = cli("verify " + fixtures() + "/nan/model.pt " + onnx + " --json " + js.string());
  EXPECT_EQ(r.code, 0) << r.out;
  json j = read_json(js);
  EXPECT_GT(j["samples"][0]["outputs"][0]["nan"]["torch"].get<int>(), 0) << "the fixture should produce NaN";
}

TEST(VerifyE2E, NanOnOneSideIsAMismatch) {
  std::string line = tag_lines("nan").at("abs");
  auto [onnx, node] = broken(
      converted("nan", "--input x:4x5"), "abs",
      [&](const Node& n) { return n.op_type == "Abs"; }, [](Model&, Node& n) { n.op_type = "Identity"; });
  fs::path js = work_dir() / "nan_one.json";
  CliRun r = cli("verify " + fixtures() + "/nan/model.pt " + onnx + " --json " + js.string());
  EXPECT_EQ(r.code, 1) << r.out;
  json j = read_json(js);
  EXPECT_TRUE(j["samples"][0]["outputs"][0]["ok"].get<bool>());
  EXPECT_FALSE(j["samples"][0]["outputs"][1]["ok"].get<bool>());
  EXPECT_GT(j["samples"][0]["outputs"][1]["nan"]["one_side_only"].get<int>(), 0);
  EXPECT_NE(r.out.find("NaN on one side"), std::string::npos) << r.out;
  // Mismatches locate on their own, without --locate.
  EXPECT_EQ(j["locate"]["node"]["name"], node) << r.out;
  EXPECT_EQ(j["locate"]["node"]["source"], line) << r.out;
}

TEST(VerifyE2E, UsageErrors) {
  std::string onnx = cnn();
  CliRun r = cli("verify " + fixtures() + "/cnn/model.pt " + onnx + " --input nope:1x3");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("error: --input nope"), std::string::npos) << r.out;
  r = cli("verify " + fixtures() + "/cnn/model.pt /nonexistent.onnx");
  EXPECT_EQ(r.code, 4) << r.out;
}

TEST(VerifyE2E, OnnxRuntimeBackend) {
  std::string onnx = cnn();
  CliRun r = cli("verify " + fixtures() + "/cnn/model.pt " + onnx + " --backend ort --samples 2");
  fs::path cache = env_or("T2O_CACHE_DIR", (env_or("HOME", ".") + "/.cache/torch2onnx").c_str());
  if (!fs::exists(cache / "node_modules" / "onnxruntime-node")) {
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("onnxruntime-node"), std::string::npos) << r.out;
    GTEST_SKIP() << "onnxruntime-node is not installed";
  }
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ONNX Runtime"), std::string::npos) << r.out;
  // The broken model disagrees in ONNX Runtime too: the model, not our runtime, is wrong.
  std::string line = tag_lines("cnn").at("relu");
  auto [bad, node] = broken(
      onnx, "relu_ort", [&](const Node& n) { return n.op_type == "Relu" && starts_with(n.doc_string, line + " "); },
      [](Model&, Node& n) { n.op_type = "Sigmoid"; });
  r = cli("verify " + fixtures() + "/cnn/model.pt " + bad + " --backend ort");
  EXPECT_EQ(r.code, 1) << r.out;
}
