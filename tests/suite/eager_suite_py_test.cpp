// Tests of tools/bench/eager_suite.py on the CPU at the small scale: it finds each task's KernelBench
// module, builds it at the task's scale, times it, writes `crl tasks check`-shaped JSON, and compares
// crl's times with eager ones. The KernelBench folder is a stand-in written here (three trivial
// modules in KernelBench's layout), so the test needs only the crl venv's torch and yaml.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/read_file.h"
#include "core/remove_tree.h"
#include "core/subprocess.h"
#include "python_script_fixture.h"

namespace crl {
namespace {

class EagerSuitePy : public testing::PythonScriptTest {
 protected:
  EagerSuitePy() : PythonScriptTest("tools/bench/eager_suite.py", "crl_eager_suite", std::chrono::minutes(3)) {}
  void SetUp() override {
    PythonScriptTest::SetUp();
    if (IsSkipped()) return;
    write("KernelBench/level1/19_ReLU.py",
          "import torch\n"
          "class Model(torch.nn.Module):\n"
          "    def forward(self, x):\n"
          "        return torch.relu(x)\n"
          "batch_size = 4096\ndim = 393216\n"
          "def get_inputs():\n    return [torch.rand(batch_size, dim)]\n"
          "def get_init_inputs():\n    return []\n");
    // A Python scalar among the inputs, as KernelBench's problem 5 has it.
    write("KernelBench/level1/5_Matrix_scalar_multiplication.py",
          "import torch\n"
          "class Model(torch.nn.Module):\n"
          "    def forward(self, A, s):\n"
          "        return A * s\n"
          "M = 16384\nN = 4096\n"
          "def get_inputs():\n    return [torch.rand(M, N), 3.14]\n"
          "def get_init_inputs():\n    return []\n");
    // A module built from module-level sizes, which the small scale must shrink.
    write("KernelBench/level2/63_Gemm_ReLU_Divide.py",
          "import torch\n"
          "class Model(torch.nn.Module):\n"
          "    def __init__(self, in_features, out_features, divisor):\n"
          "        super().__init__()\n"
          "        self.linear = torch.nn.Linear(in_features, out_features)\n"
          "        self.divisor = divisor\n"
          "    def forward(self, x):\n"
          "        return torch.relu(self.linear(x)) / self.divisor\n"
          "batch_size = 1024\nin_features = 8192\nout_features = 8192\n"
          "def get_inputs():\n    return [torch.rand(batch_size, in_features)]\n"
          "def get_init_inputs():\n    return [in_features, out_features, 2.0]\n");
  }
};

// One run (Python and torch start once): three tasks with modules and one without.
TEST_F(EagerSuitePy, TimesTheModulesAtTheTasksScaleAndWritesCheckShapedJson) {
  const std::string out = (dir_ / "eager.json").string();
  const auto result = run_script({"run", "--kernelbench", dir_.string(), "--scale", "small", "--device", "cpu",
                                  "--task", "level1/019", "--task", "level1/005", "--task", "level2/063",
                                  "--task", "level1/020", "--warmup", "1", "--budget", "0.01", "--min-trials", "3",
                                  "--max-trials", "4", "--out", out});
  EXPECT_EQ(result.exit_code, 1) << result.output;  // level1/020 has no module here
  const auto report = nlohmann::json::parse(read_file(out, "eager JSON"));
  EXPECT_EQ(report["backend"], "cpu");
  EXPECT_EQ(report["scale"], "small");
  EXPECT_EQ(report["tf32"], false);
  EXPECT_EQ(report["tasks"], 4);
  EXPECT_EQ(report["failures"], 1);
  ASSERT_EQ(report["results"].size(), 4u);
  nlohmann::json timed = nlohmann::json::array();
  for (const auto& r : report["results"]) {
    if (r["id"] == "level1/020_leaky_relu") {
      EXPECT_EQ(r["status"], "error");
      EXPECT_NE(r["message"].get<std::string>().find("no KernelBench file level1/20_*.py"), std::string::npos)
          << r["message"];
    } else {
      timed.push_back(r);
    }
  }
  ASSERT_EQ(timed.size(), 3u);
  const std::map<std::string, std::vector<int64_t>> shapes = {{"level1/005_matrix_scalar_mul", {256, 1024}},
                                                               {"level1/019_relu", {16, 16384}},
                                                               {"level2/063_gemm_relu_divide", {16, 256}}};
  for (const auto& r : timed) {
    const std::string id = r["id"];
    ASSERT_EQ(r["status"], "ok") << id << ": " << r["message"];
    ASSERT_TRUE(shapes.count(id)) << id;
    EXPECT_EQ(r["output_shapes"][0].get<std::vector<int64_t>>(), shapes.at(id)) << id;
    EXPECT_EQ(r["output_dtypes"][0], "float32") << id;
    const auto times = r["times_ms"].get<std::vector<double>>();
    EXPECT_GE(times.size(), 3u) << id;
    EXPECT_LE(times.size(), 4u) << id;
    EXPECT_EQ(r["trials"].get<size_t>(), times.size()) << id;
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                            : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
    EXPECT_DOUBLE_EQ(r["median_ms"].get<double>(), median) << id;
    EXPECT_GT(r["median_ms"].get<double>(), 0) << id;
    EXPECT_GT(r["flops"].get<double>(), 0) << id;
    // KernelBench's own get_inputs() has the full-scale shapes, not the small ones.
    EXPECT_EQ(r["kernelbench_shapes_match"], false) << id;
  }
  const auto& gemm = timed[2];
  ASSERT_EQ(gemm["id"], "level2/063_gemm_relu_divide");
  EXPECT_EQ(gemm["kernelbench_sizes_scaled"], nlohmann::json({"batch_size", "in_features", "out_features"}));
}

TEST_F(EagerSuitePy, CompareGivesRatiosPerTaskAndLevelAndTheOutliers) {
  write("eager.json", R"({"results": [
      {"id": "level1/001_a", "status": "ok", "median_ms": 2.0},
      {"id": "level1/002_b", "status": "ok", "median_ms": 1.0},
      {"id": "level2/001_c", "status": "ok", "median_ms": 4.0},
      {"id": "level2/002_d", "status": "error", "median_ms": 0.0}]})");
  write("crl1.json", R"({"results": [{"id": "level1/001_a", "status": "ok", "median_ms": 2.2},
                                     {"id": "level1/002_b", "status": "ok", "median_ms": 1.6}]})");
  write("crl2.json", R"({"results": [{"id": "level2/001_c", "status": "ok", "median_ms": 1.0},
                                     {"id": "level2/002_d", "status": "ok", "median_ms": 1.0}]})");
  const auto result = run_script({"compare", (dir_ / "eager.json").string(), (dir_ / "crl1.json").string(),
                                  (dir_ / "crl2.json").string(), "--json"});
  ASSERT_TRUE(result.ok()) << result.output;
  const auto summary = nlohmann::json::parse(result.output);
  EXPECT_EQ(summary["tasks"], 3);  // level2/002 failed in eager: not compared
  EXPECT_EQ(summary["within"], 1);
  EXPECT_NEAR(summary["median_ratio_per_level"]["level1"].get<double>(), (1.1 + 1.6) / 2, 1e-12);
  EXPECT_NEAR(summary["median_ratio_per_level"]["level2"].get<double>(), 0.25, 1e-12);
  ASSERT_EQ(summary["outliers"].size(), 2u);
  EXPECT_EQ(summary["outliers"][0]["id"], "level1/002_b");
  EXPECT_EQ(summary["outliers"][1]["id"], "level2/001_c");
  // A task id that matches nothing is bad input (exit 3), before anything runs.
  EXPECT_EQ(run_script({"run", "--kernelbench", dir_.string(), "--task", "level9/001", "--out",
                        (dir_ / "none.json").string()}).exit_code, 3);
}

}  // namespace
}  // namespace crl
