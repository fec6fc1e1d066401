// Tests of tools/suite/add_kernelbench_params.py, which writes each spec's `kernelbench_params` from KernelBench's
// modules: on a stand-in KernelBench and suite written here (CPU, the crl venv's torch), and, where
// $CRL_KERNELBENCH_DIR names a real checkout (commit 423217d), that all 250 committed specs are what it derives.
#include <gtest/gtest.h>

#include <cstdlib>

#include "program/program_text.h"
#include "program/task_spec.h"
#include "python_script_fixture.h"

namespace crl {
namespace {

class AddKernelBenchParamsPy : public testing::PythonScriptTest {
 protected:
  AddKernelBenchParamsPy()
      : PythonScriptTest("tools/suite/add_kernelbench_params.py", "crl_add_kernelbench_params", std::chrono::minutes(5)) {}

  std::vector<std::string> args(bool check) {
    std::vector<std::string> a = {"--kernelbench", dir_.string(), "--suite", (dir_ / "suite").string()};
    if (check) a.push_back("--check");
    return a;
  }
};

// A module that declares an extra parameter before its layers, a Linear, and a BatchNorm with its buffers.
// `extra` adds a parameter the spec does not have.
std::string module(const std::string& extra = "") {
  return "import torch\n"
         "class Model(torch.nn.Module):\n"
         "    def __init__(self, in_features, out_features):\n"
         "        super().__init__()\n"
         "        self.scale = torch.nn.Parameter(torch.randn(out_features, 1, 1))\n"
         "        self.fc = torch.nn.Linear(in_features, out_features)\n"
         "        self.bn = torch.nn.BatchNorm1d(out_features)\n" +
         extra +
         "    def forward(self, x):\n"
         "        return self.bn(self.fc(x)) * self.scale.view(-1)\n"
         "batch_size = 8\nin_features = 16\nout_features = 32\n"
         "def get_inputs():\n    return [torch.rand(batch_size, in_features)]\n"
         "def get_init_inputs():\n    return [in_features, out_features]\n";
}

// The spec keeps the Linear's weight transposed ([in, out]) and the scale flat ([out]), and lists its params
// in another order than the module.
constexpr const char* kSpec =
    "// crl:spec\n"
    "task: level2/001_linear_bn\n"
    "category: gemm\n"
    "inputs:\n"
    "  - {name: x, shape: [batch_size, in_features], dtype: float32}\n"
    "params:\n"
    "  - {name: linear_weight, shape: [in_features, out_features], dtype: float32}\n"
    "  - {name: linear_bias, shape: [out_features], dtype: float32}\n"
    "  - {name: bn_weight, shape: [out_features], dtype: float32}\n"
    "  - {name: bn_bias, shape: [out_features], dtype: float32}\n"
    "  - {name: scale, shape: [out_features], dtype: float32}\n"
    "init_args: [in_features, out_features]\n"
    "scales:\n"
    "  full: {batch_size: 8, in_features: 16, out_features: 32}\n"
    "  small: {batch_size: 2, in_features: 4, out_features: 8}\n"
    "flops: batch_size\n"
    "bytes: batch_size\n"
    "// crl:host\n"
    "at::Tensor forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const at::Tensor& g,\n"
    "                   const at::Tensor& beta, const at::Tensor& scale);\n";

TEST_F(AddKernelBenchParamsPy, WritesTheModulesOrderShapesAndTransformsAndCrlReadsThem) {
  write("KernelBench/level2/1_LinearBN.py", module());
  write("suite/level2/001_linear_bn.crl", kSpec);
  const auto before = run_script(args(true));
  EXPECT_EQ(before.exit_code, 1) << before.output;
  EXPECT_NE(before.output.find("1 tasks, 1 differ"), std::string::npos) << before.output;

  const auto written = run_script(args(false));
  ASSERT_EQ(written.exit_code, 0) << written.output;
  const std::string spec = read("suite/level2/001_linear_bn.crl");
  // The module's order; fc.weight is the spec's weight with its two dimensions swapped, scale the spec's
  // reshaped; the running statistics take their BatchNorm weight's shape; the block ends the spec section.
  EXPECT_NE(spec.find(
                "bytes: batch_size\n"
                "kernelbench_params:\n"
                "  parameters:\n"
                "    - {name: scale, shape: [out_features, 1, 1], param: scale, transform: reshape}\n"
                "    - {name: fc.weight, shape: [out_features, in_features], param: linear_weight, transform: 'transpose(0, 1)'}\n"
                "    - {name: fc.bias, shape: [out_features], param: linear_bias}\n"
                "    - {name: bn.weight, shape: [out_features], param: bn_weight}\n"
                "    - {name: bn.bias, shape: [out_features], param: bn_bias}\n"
                "  buffers:\n"
                "    - {name: bn.running_mean, shape: [out_features], unmatched: 'BatchNorm running statistic, unused in training mode'}\n"
                "    - {name: bn.running_var, shape: [out_features], unmatched: 'BatchNorm running statistic, unused in training mode'}\n"
                "    - {name: bn.num_batches_tracked, shape: [], unmatched: 'BatchNorm call counter, read by no output'}\n"
                "// crl:host\n"),
            std::string::npos)
      << spec;
  // What it writes, crl reads: at the small scale fc.weight is [8, 4], from the spec's [4, 8] weight.
  const ProgramText program = parse_program_text(spec, "001_linear_bn.crl");
  const TaskSpec parsed = parse_task_spec(program.spec, program.origin);
  ASSERT_TRUE(parsed.kernelbench_params.has_value());
  const KernelBenchTensor& weight = parsed.kernelbench_params->parameters[1];
  EXPECT_EQ(weight.transform, KernelBenchTransform::transpose);
  EXPECT_EQ(parsed.kernelbench_shape_at(weight, "small"), (std::vector<int64_t>{8, 4}));

  const auto again = run_script(args(true));
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("1 tasks, 0 differ, 0 failed"), std::string::npos) << again.output;
  // Run again, the block is replaced, not repeated.
  ASSERT_EQ(run_script(args(false)).exit_code, 0);
  EXPECT_EQ(read("suite/level2/001_linear_bn.crl"), spec);
}

TEST_F(AddKernelBenchParamsPy, RefusesATensorNoParamHoldsWithoutAReason) {
  write("KernelBench/level2/1_LinearBN.py", module("        self.extra = torch.nn.Parameter(torch.zeros(3))\n"));
  write("suite/level2/001_linear_bn.crl", kSpec);
  const auto result = run_script(args(false));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("level2/001_linear_bn: matched to nothing and without a reason: KernelBench's "
                               "parameter 'extra' [3]"),
            std::string::npos)
      << result.output;
  EXPECT_EQ(read("suite/level2/001_linear_bn.crl"), kSpec);
}

// The committed specs against a real KernelBench checkout: every task's block is what the script derives
// from KernelBench's module at every scale it builds at.
TEST_F(AddKernelBenchParamsPy, CommittedSpecsAgreeWithKernelBench) {
  const char* kernelbench = std::getenv("CRL_KERNELBENCH_DIR");
  if (!kernelbench || !*kernelbench) {
    GTEST_SKIP() << "set CRL_KERNELBENCH_DIR to a KernelBench checkout (commit 423217d) to compare the 250 specs with it";
  }
  const auto result = run_script({"--kernelbench", kernelbench, "--check"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("250 tasks, 0 differ, 0 failed"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace crl
