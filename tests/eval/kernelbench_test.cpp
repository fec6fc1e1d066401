// KernelBench-format candidates (tests/data/eval/kernelbench) judged end to end on the CPU backend by
// the same judge as .crl programs: the legitimate ones ok, the malformed ones format_error or
// compile_error naming what is wrong, the attacks never rewarded.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <unistd.h>

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

// KernelBench's rule for parameters (--kernelbench DIR): the judge builds the checkout's Model under a
// seed and gives its values to crl's reference; a ModelNew built under the same seed keeps its own
// tensors, matched or not. Here the checkout is the test's own stand-in module.
Evaluator& kernelbench_rule(const std::string& checkout) {
  static std::map<std::string, std::unique_ptr<Evaluator>> by_checkout;
  auto& e = by_checkout[checkout];
  if (!e) {
    EvalOptions o = quick_options(Backend::cpu);
    o.timing = false;
    o.kernelbench_dir = fixture_dir() + "/kernelbench/" + checkout;
    e = std::make_unique<Evaluator>(o, fixture_compiler());
  }
  return *e;
}

TEST_F(KernelBenchTest, KernelBenchsRuleJudgesAModuleByItsOutputsUnderTheModelsSeed) {
  Evaluator& rule = kernelbench_rule("checkout");
  const Verdict same = judge(kConv, "conv.legit", rule);
  ASSERT_TRUE(same.ok()) << explain(same);
  EXPECT_EQ(same.params, "kernelbench");
  EXPECT_NE(same.steps.front().detail.find("parameters by KernelBench's rule"), std::string::npos) << explain(same);
  // Its tensors packed into one: crl's rule cannot give it the task's values, KernelBench's judges it.
  expect_status(judge(kConv, "conv_packed.kbrule"), VerdictStatus::kFormatError, "ModelNew has 1 parameter");
  const Verdict packed = judge(kConv, "conv_packed.kbrule", rule);
  EXPECT_TRUE(packed.ok()) << explain(packed);
  // Values of its own, not Model's under the seed: its outputs are not the reference's.
  const Verdict own = judge(kConv, "conv_own_init.kbrule", rule);
  EXPECT_EQ(own.status, VerdictStatus::kMismatch) << explain(own);
  // A .crl program receives Model's values as its params, and is right with them.
  const Verdict reference = rule.evaluate(real_suite().find(kConv), real_suite().find(kConv).program, "the reference");
  EXPECT_TRUE(reference.ok()) << explain(reference);
  EXPECT_EQ(reference.params, "kernelbench");
  EXPECT_EQ(judge(kConv, "conv.legit").params, "crl");
}

// --baseline kernelbench: the reference's half of every timed pair is KernelBench's Model from
// Python (crl's C++ reference still decides correctness), so a ModelNew that calls the same ops
// pays the same Python overhead on both sides. Under crl's parameter rule Model is bound to the
// call's params, as a ModelNew is.
TEST_F(KernelBenchTest, BaselineKernelBenchTimesTheCheckoutsModelFromPython) {
  EvalOptions o = quick_options(Backend::cpu);
  o.kernelbench_dir = fixture_dir() + "/kernelbench/checkout";
  o.baseline = "kernelbench";
  Evaluator python_baseline(o, fixture_compiler());
  const Verdict v = judge(kConv, "conv.legit", python_baseline);
  ASSERT_TRUE(v.ok()) << explain(v);
  EXPECT_EQ(v.baseline, "kernelbench");
  EXPECT_GT(v.reference_time.median_us, 0) << explain(v);
  EXPECT_NE(v.steps.front().detail.find("the reference's time is KernelBench's Model's"), std::string::npos) << explain(v);
  EvalOptions without = quick_options(Backend::cpu);
  without.baseline = "kernelbench";
  try {
    Evaluator refused(without, fixture_compiler());
    ADD_FAILURE() << "baseline kernelbench without a checkout was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--kernelbench DIR"), std::string::npos) << e.what();
  }
}

TEST_F(KernelBenchTest, KernelBenchsRuleNeedsTheTasksModuleAndOneThatMatchesTheSpec) {
  // A checkout whose module has a parameter the spec lacks: crl cannot judge by it (not the candidate's fault).
  const Verdict other = judge(kRelu, "relu.legit", kernelbench_rule("checkout_other"));
  EXPECT_EQ(other.status, VerdictStatus::kInternalError) << explain(other);
  EXPECT_NE(other.message.find("Model has 1 parameter"), std::string::npos) << explain(other);
  // A task the checkout has no module for is bad input, said before anything is judged.
  try {
    (void)judge("level1/020_leaky_relu", "relu.legit", kernelbench_rule("checkout"));
    ADD_FAILURE() << "a task without a module in the checkout was judged";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no KernelBench module for level1/020_leaky_relu"), std::string::npos) << e.what();
  }
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

// An extension crl's compiler cannot build makes the module's load_inline raise, as torch's does:
// uncaught, the module does not import (compile_error, the compiler's log in the verdict); caught,
// the module's own fallback is judged (CUDA-L1's modules often wrap load_inline so).
TEST_F(KernelBenchTest, AnExtensionThatDoesNotCompileIsACompileErrorWithItsLog) {
  const Verdict v = judge(kRelu, "load_inline_compile_error");
  expect_status(v, VerdictStatus::kCompileError, "Error building extension 'crl_test_broken'");
  EXPECT_NE(v.compile_log.find("crl_no_such_method"), std::string::npos) << explain(v);
}

TEST_F(KernelBenchTest, ALoadInlineThatFailsRaisesSoTheModulesFallbackIsJudged) {
  const Verdict v = judge(kRelu, "load_inline_fallback.legit");
  ASSERT_TRUE(v.ok()) << explain(v);
  bool said = false;
  for (const auto& step : v.steps) {
    said = said || (step.name == "compile load_inline 'crl_test_fallback'" && step.detail.find("does not compile") != std::string::npos);
  }
  EXPECT_TRUE(said) << explain(v);
  EXPECT_NE(v.compile_log.find("crl_relu_never_declared"), std::string::npos) << "the compiler's log stays in the verdict: " << explain(v);
}

TEST_F(KernelBenchTest, AnExtensionsFlagsMayNotNameFiles) {
  const Verdict v = judge(kRelu, "load_inline_reads_a_file");
  expect_status(v, VerdictStatus::kCompileError, "request stage failed");
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

// The Python worker has a thread from before the file rules went on: Python run on it (a C signal
// handler through ctypes) created a file in /tmp before the rules reached every thread.
TEST_F(KernelBenchTest, NoThreadOfThePythonWorkerWritesOutsideItsFolder) {
  const std::string prefix = "/tmp/crl-py-other-thread-" + std::to_string(getpid()) + "-";
  const Verdict v = judge(kRelu, "attack_earlier_thread_write");
  ASSERT_TRUE(v.ok()) << explain(v);
  bool written = false;
  for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
    if (entry.path().string().rfind(prefix, 0) != 0) continue;
    written = true;
    std::filesystem::remove(entry.path());
  }
  if (v.worker_log.find("Landlock ABI") == std::string::npos) GTEST_SKIP() << "this kernel has no Landlock: writes are not confined here";
  EXPECT_FALSE(written) << v.worker_log;
  EXPECT_NE(v.worker_log.find("other threads signalled, 0 wrote, "), std::string::npos) << v.worker_log;
  EXPECT_EQ(v.worker_log.find("other threads signalled, 0 wrote, 0 refused"), std::string::npos) << "no thread ran the handler";
  EXPECT_EQ(v.worker_log.find("that block it"), std::string::npos) << v.worker_log;
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
