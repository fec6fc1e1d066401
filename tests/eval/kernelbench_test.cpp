// KernelBench-format candidates (tests/data/eval/kernelbench) judged end to end on the CPU backend by
// the same judge as .crl programs: the legitimate ones ok, the malformed ones format_error or
// compile_error naming what is wrong, the attacks never rewarded.
#include <gtest/gtest.h>

#include <string>

#include "core/read_file.h"
#include "eval_fixtures.h"
#include "program/program_text.h"
#include "pyprogram/python_program.h"

namespace crl::eval {
namespace {

using testing::explain;
using testing::fixture_compiler;
using testing::fixture_dir;
using testing::quick_options;

const Suite& real_suite() {
  static const Suite suite = Suite::load(std::string(CRL_SOURCE_DIR) + "/jobs/suite");
  return suite;
}

constexpr const char* kRelu = "level1/019_relu";
constexpr const char* kConv = "level2/001_conv2d_relu_bias_add";

// Correctness and guards only: what these tests are about is decided before timing.
Evaluator& untimed() {
  static Evaluator e([] {
    EvalOptions o = quick_options(Backend::cpu);
    o.timing = false;
    return o;
  }(), fixture_compiler());
  return e;
}

Evaluator& timed() {
  static Evaluator e(quick_options(Backend::cpu), fixture_compiler());
  return e;
}

// The program's text, with @CACHE_DIR@ replaced by the compile cache's folder.
ProgramText program(const std::string& name) {
  const std::string path = fixture_dir() + "/kernelbench/" + name + ".py";
  std::string text = read_file(path, "KernelBench-format program");
  for (size_t at = text.find("@CACHE_DIR@"); at != std::string::npos; at = text.find("@CACHE_DIR@"))
    text.replace(at, 11, fixture_compiler().options().cache_dir);
  return parse_kernelbench_text(text, path);
}

Verdict judge(const std::string& task, const std::string& name, Evaluator& evaluator = untimed()) {
  return evaluator.evaluate(real_suite().find(task), program(name), name);
}

class KernelBenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!pyprogram::python_available()) GTEST_SKIP() << "crl was built without an embedded Python: " << pyprogram::python_description();
  }
};

void expect_status(const Verdict& v, VerdictStatus status, const std::string& says) {
  EXPECT_EQ(v.status, status) << explain(v);
  EXPECT_NE(v.message.find(says), std::string::npos) << "expected the message to say '" << says << "':\n" << explain(v);
  EXPECT_EQ(v.reward, 0) << explain(v);
}

// Not rewarded: refused as a hack, or failed (mismatch, runtime error): never ok.
void expect_refused(const Verdict& v) {
  EXPECT_FALSE(v.ok()) << explain(v);
  EXPECT_EQ(v.reward, 0) << explain(v);
}

TEST_F(KernelBenchTest, ALegitimateModuleIsTimedAgainstTheReference) {
  const Verdict v = judge(kRelu, "relu.legit", timed());
  ASSERT_TRUE(v.ok()) << explain(v);
  EXPECT_GT(v.speedup, 0) << explain(v);
  EXPECT_GT(v.reward, 0) << explain(v);
}

TEST_F(KernelBenchTest, ParametersReachTheModuleByOrderAndShape) {
  // Correct in every trial only if crl's conv_weight, conv_bias and bias reached conv.weight,
  // conv.bias and bias: the module's own random values would not match.
  const Verdict v = judge(kConv, "conv.legit");
  ASSERT_TRUE(v.ok()) << explain(v);
  EXPECT_GE(v.trials_passed, 3) << explain(v);
}

TEST_F(KernelBenchTest, DropoutRunsAsAtInferenceAsCrlsReferencesDo) {
  const Verdict v = judge("level2/066_matmul_dropout_softmax", "dropout.legit");
  EXPECT_TRUE(v.ok()) << explain(v);
}

TEST_F(KernelBenchTest, TorchsTf32FlagsReadAsInAnyProcess) {
  const Verdict v = judge(kRelu, "reads_tf32_flags.legit");
  EXPECT_TRUE(v.ok()) << explain(v);
}

TEST_F(KernelBenchTest, AModeUsedWithinForwardIsFine) {
  const Verdict v = judge(kRelu, "mode_within_forward.legit");
  EXPECT_TRUE(v.ok()) << explain(v);
}

TEST_F(KernelBenchTest, TensorsThatDoNotMatchTheTasksModuleAreFormatErrors) {
  expect_status(judge(kConv, "params_missing"), VerdictStatus::kFormatError, "ModelNew has 2 parameters");
  expect_status(judge(kConv, "params_shape"), VerdictStatus::kFormatError, "has shape [16, 8, 5, 5]");
  expect_status(judge(kConv, "params_dtype"), VerdictStatus::kFormatError, "is float64");
}

TEST_F(KernelBenchTest, WhatIsNoModuleToJudgeSaysWhy) {
  expect_status(judge(kRelu, "not_a_module"), VerdictStatus::kFormatError, "does not derive from torch.nn.Module");
  expect_status(judge(kRelu, "import_error"), VerdictStatus::kCompileError, "No module named 'crl_no_such_module'");
  expect_status(judge(kRelu, "load_sources"), VerdictStatus::kFormatError, "crl builds load_inline's sources only");
  expect_status(judge(kRelu, "torch_compile"), VerdictStatus::kFormatError, "torch.compile starts compiler processes");
  expect_status(judge(kRelu, "init_raises"), VerdictStatus::kRuntimeError, "crl-test: no model today");
}

TEST_F(KernelBenchTest, LoadInlineIsBuiltByCrlsCompilerAndImportedByTheWorker) {
  const Verdict v = judge(kRelu, "load_inline.legit");
  ASSERT_TRUE(v.ok()) << explain(v);
  bool built = false;
  for (const auto& step : v.steps) built = built || (step.name == "compile load_inline 'crl_test_relu'" && step.passed);
  EXPECT_TRUE(built) << explain(v);
  // Judged again: the extension comes from the cache.
  const Verdict again = judge(kRelu, "load_inline.legit");
  ASSERT_TRUE(again.ok()) << explain(again);
  for (const auto& step : again.steps) {
    if (step.name.rfind("compile load_inline", 0) == 0) EXPECT_EQ(step.detail, "cache hit") << explain(again);
  }
}

TEST_F(KernelBenchTest, AnExtensionThatDoesNotCompileIsACompileErrorWithItsLog) {
  const Verdict v = judge(kRelu, "load_inline_compile_error");
  expect_status(v, VerdictStatus::kCompileError, "load_inline extension 'crl_test_broken' does not compile");
  EXPECT_NE(v.compile_log.find("crl_no_such_method"), std::string::npos) << explain(v);
}

TEST_F(KernelBenchTest, AnExtensionsFlagsMayNotNameFiles) {
  const Verdict v = judge(kRelu, "load_inline_reads_a_file");
  expect_status(v, VerdictStatus::kCompileError, "does not compile (request stage)");
  EXPECT_NE(v.compile_log.find("'-include' is not one crl passes"), std::string::npos) << explain(v);
  EXPECT_EQ(v.compile_log.find("root:"), std::string::npos) << explain(v);
}

TEST_F(KernelBenchTest, TheSandboxHoldsForPython) {
  const Verdict process = judge(kRelu, "attack_subprocess");
  expect_status(process, VerdictStatus::kRuntimeError, "PermissionError");
  const Verdict cache = judge(kRelu, "attack_read_cache");
  expect_refused(cache);
  EXPECT_NE(cache.message.find("Error"), std::string::npos) << explain(cache);
}

TEST_F(KernelBenchTest, OutputsMustBePlainTensorsAndNoModeOutlivesForward) {
  expect_status(judge(kRelu, "attack_lazy_subclass"), VerdictStatus::kRuntimeError, "a subclass of torch.Tensor");
  expect_status(judge(kRelu, "attack_mode_left_on"), VerdictStatus::kRuntimeError, "dispatch mode(s) active");
}

TEST_F(KernelBenchTest, TheGuardsCatchPythonAsTheyCatchCpp) {
  for (const char* name : {"attack_thread_after_return", "attack_data_ptr_cache", "attack_returns_input"}) {
    SCOPED_TRACE(name);
    expect_refused(judge(kRelu, name));
  }
  expect_refused(judge(kConv, "attack_returns_param"));
}

TEST(KernelBenchText, ATextWithoutModelNewIsRefusedBeforeAnythingRuns) {
  EXPECT_THROW(parse_kernelbench_text("import torch\n", "x.py"), InputError);
  EXPECT_THROW(parse_kernelbench_text("  class ModelNew(torch.nn.Module): pass\n", "x.py"), InputError);  // nested
  EXPECT_THROW(parse_kernelbench_text("class ModelNewer(torch.nn.Module): pass\n", "x.py"), InputError);
  EXPECT_THROW(parse_kernelbench_text(std::string("class ModelNew: pass\n\0", 22), "x.py"), InputError);
  const ProgramText p = parse_kernelbench_text("import torch\nclass  ModelNew(torch.nn.Module): pass\n", "x.py");
  EXPECT_EQ(p.kind, ProgramKind::kernelbench);
  EXPECT_EQ(render_program_text(p), "import torch\nclass  ModelNew(torch.nn.Module): pass\n");
  try {
    parse_kernelbench_text("x = 1\n", "cand.py");
    FAIL() << "no ModelNew was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cand.py: expected a `class ModelNew(nn.Module)`"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crl::eval
