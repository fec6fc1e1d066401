// Tests of tools/suite/add_init_args.py, which writes each spec's `init_args` from KernelBench's modules:
// on a stand-in KernelBench and suite written here (CPU, the crl venv's torch), and, where
// $CRL_KERNELBENCH_DIR names a real checkout (commit 423217d), that all 250 committed specs are what
// it derives: their arguments at full scale equal KernelBench's get_init_inputs().
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/read_file.h"
#include "core/remove_tree.h"
#include "core/subprocess.h"
#include "program/program_text.h"
#include "program/task_spec.h"
#include "python_script_fixture.h"

namespace crl {
namespace {

class AddInitArgsPy : public testing::PythonScriptTest {
 protected:
  AddInitArgsPy() : PythonScriptTest("tools/suite/add_init_args.py", "crl_add_init_args", std::chrono::minutes(5)) {}
};

// A conv module whose sizes are crl's scale variables under KernelBench's names, a bias shape tuple,
// a float and a bool; a ReLU without arguments.
constexpr const char* kConvModule =
    "import torch\n"
    "class Model(torch.nn.Module):\n"
    "    def __init__(self, in_channels, out_channels, kernel_size, bias_shape, scale, flag):\n"
    "        super().__init__()\n"
    "        self.conv = torch.nn.Conv2d(in_channels, out_channels, kernel_size)\n"
    "        self.bias = torch.nn.Parameter(torch.randn(bias_shape))\n"
    "    def forward(self, x):\n"
    "        return self.conv(x) + self.bias\n"
    "batch_size = 8\nin_channels = 3\nout_channels = 16\nkernel_size = 3\n"
    "bias_shape = (out_channels, 1, 1)\n"
    "def get_inputs():\n    return [torch.rand(batch_size, in_channels, 32, 32)]\n"
    "def get_init_inputs():\n    return [in_channels, out_channels, kernel_size, bias_shape, 2.0, True]\n";

constexpr const char* kConvSpec =
    "// crl:spec\n"
    "task: level2/001_conv\n"
    "category: conv2d\n"
    "inputs:\n"
    "  - {name: x, shape: [batch, cin, 32, 32], dtype: float32}\n"
    "params:\n"
    "  - {name: w, shape: [cout, cin, kernel_size, kernel_size], dtype: float32}\n"
    "  - {name: b, shape: [cout], dtype: float32}\n"
    "  - {name: bias, shape: [cout, 1, 1], dtype: float32}\n"
    "scales:\n"
    "  full: {batch: 8, cin: 3, cout: 16, kernel_size: 3}\n"
    "  small: {batch: 1, cin: 3, cout: 4, kernel_size: 3}\n"
    "flops: batch\n"
    "bytes: batch\n"
    "// crl:host\n"
    "at::Tensor forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const at::Tensor& bias);\n";

TEST_F(AddInitArgsPy, WritesTheArgumentsInScaleVariablesAndChecksThem) {
  write("KernelBench/level2/1_Conv.py", kConvModule);
  write("KernelBench/level1/19_ReLU.py",
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
        "def get_inputs():\n    return [torch.rand(4, 4)]\ndef get_init_inputs():\n    return []\n");
  write("suite/level2/001_conv.crl", kConvSpec);
  write("suite/level1/019_relu.crl",
        "// crl:spec\ntask: level1/019_relu\ncategory: activation\ninputs:\n  - {name: x, shape: [n], dtype: float32}\n"
        "init_args: [1]\nscales:\n  full: {n: 4}\nflops: n\nbytes: n\n// crl:host\nat::Tensor forward(const at::Tensor& x);\n");
  const std::vector<std::string> args = {"--kernelbench", dir_.string(), "--suite", (dir_ / "suite").string()};
  auto check = args;
  check.push_back("--check");
  const auto before = run_script(check);
  EXPECT_EQ(before.exit_code, 1) << before.output;  // one spec without init_args, one with the wrong ones
  EXPECT_NE(before.output.find("2 tasks, 2 differ"), std::string::npos) << before.output;

  const auto written = run_script(args);
  ASSERT_EQ(written.exit_code, 0) << written.output;
  const std::string conv = read("suite/level2/001_conv.crl");
  // KernelBench's in_channels is crl's cin (3 at both scales), out_channels cout, inside the tuple too;
  // the line goes before `scales:`.
  EXPECT_NE(conv.find("  - {name: bias, shape: [cout, 1, 1], dtype: float32}\n"
                      "init_args: [cin, cout, kernel_size, '(cout, 1, 1)', 2.0, true]\nscales:\n"),
            std::string::npos) << conv;
  EXPECT_NE(read("suite/level1/019_relu.crl").find("inputs:\n  - {name: x, shape: [n], dtype: float32}\ninit_args: []\nscales:"),
            std::string::npos);
  // What it writes, crl reads: the small scale's module has 4 output channels.
  const ProgramText program = parse_program_text(conv, "001_conv.crl");
  EXPECT_EQ(python_literal(parse_task_spec(program.spec, program.origin).init_args_at("small")),
            "[3, 4, 3, (4, 1, 1), 2.0, True]");
  const auto again = run_script(check);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("2 tasks, 0 differ, 0 failed"), std::string::npos) << again.output;
}

TEST_F(AddInitArgsPy, RefusesArgumentsWhoseModuleDoesNotHaveTheSpecsParameters) {
  // The spec's bias is [cout] where KernelBench's bias_shape is (out_channels, 1, 1): nothing written.
  std::string spec = kConvSpec;
  spec.replace(spec.find("[cout, 1, 1]"), 12, "[cout]");
  write("KernelBench/level2/1_Conv.py", kConvModule);
  write("suite/level2/001_conv.crl", spec);
  const auto result = run_script({"--kernelbench", dir_.string(), "--suite", (dir_ / "suite").string()});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("level2/001_conv: at scale 'full' KernelBench's parameters are"), std::string::npos)
      << result.output;
  EXPECT_EQ(read("suite/level2/001_conv.crl"), spec);
}

// The committed specs against a real KernelBench checkout: every task's arguments at full scale are
// its get_init_inputs() (value and Python type), at every scale its module has the spec's parameters,
// and the specs hold exactly what the script derives.
TEST_F(AddInitArgsPy, CommittedSpecsAgreeWithKernelBench) {
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
