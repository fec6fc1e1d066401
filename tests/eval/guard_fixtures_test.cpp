// Hack guards end to end on the CPU backend: every fixture under tests/data/eval/hacks runs through
// the evaluator; each hack gets hack:<its kind> (or mismatch, where stated), never ok, and each
// legitimate program of similar shape gets ok.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <future>

#include "core/subprocess.h"
#include "eval/guard_symbols.h"
#include "eval_fixtures.h"

namespace crl::eval {
namespace {

using testing::explain;
using testing::expect_hack;
using testing::fixture_compiler;
using testing::fixture_dir;
using testing::fixture_suite;
using testing::quick_options;

Verdict evaluate_fixture(const std::string& file, bool remeasure_everything = false,
                         const std::string& task = "level1/019_relu") {
  // One evaluator per option set; the compile cache is shared.
  static Evaluator plain(quick_options(Backend::cpu), fixture_compiler());
  static Evaluator remeasuring(
      [] {
        EvalOptions o = quick_options(Backend::cpu);
        o.remeasure_above_speedup = 0;  // every speedup is re-measured
        return o;
      }(),
      fixture_compiler());
  Evaluator& e = remeasure_everything ? remeasuring : plain;
  return e.evaluate(fixture_suite().find(task), load_program_file(fixture_dir() + "/hacks/" + file + ".cpu.crl"), file);
}

// The CUDA fixtures (hacks, legitimate twins, attacks) run only on a GPU, where time is scarce: each
// must at least compile here (nvcc and the host compiler are on every machine crl builds on), so a
// GPU session never spends its minutes finding a typo. Their tasks (level1/019_relu,
// level2/001_row_mean) take one input each; the input_copy attacks, level2/010's three; the L2
// set-aside and the precision attacks and their twin, level1/001's two.
TEST(GuardFixturesTest, EveryCudaFixtureCompilesOnTheMachinesWithoutAGpu) {
  if (find_on_path("nvcc").empty()) GTEST_SKIP() << "nvcc is not on PATH: CUDA programs cannot compile here";
  std::vector<std::pair<std::string, std::future<CompileResult>>> compiles;
  for (const char* folder : {"hacks", "attacks"}) {
    for (const auto& entry : std::filesystem::directory_iterator(fixture_dir() + "/" + folder)) {
      const std::string path = entry.path().string();
      if (!path.ends_with(".cuda.crl")) continue;
      const std::string name = entry.path().filename().string();
      const bool matmul = name.starts_with("l2_set_aside") || name.starts_with("precision_") || name.starts_with("tf32x3");
      const size_t num_args = name.starts_with("input_copy") ? 3 : matmul ? 2 : 1;
      compiles.emplace_back(path, fixture_compiler().submit({load_program_file(path), num_args, Backend::cuda, ""}));
    }
  }
  EXPECT_GE(compiles.size(), 24u);
  for (auto& [path, result] : compiles) {
    const CompileResult r = result.get();
    EXPECT_TRUE(r.ok) << path << " (" << r.stage << " stage):\n" << r.log;
  }
}

TEST(GuardFixturesTest, DeferredWorkThreadStillAliveIsAHack) {
  expect_hack(evaluate_fixture("deferred_work.hack"), "deferred_work");
}
TEST(GuardFixturesTest, DeferredWorkJoinedThreadIsOk) {
  const Verdict v = evaluate_fixture("deferred_work.legit");
  EXPECT_TRUE(v.ok()) << explain(v);
}

TEST(GuardFixturesTest, OutputCacheKeyedOnAddressIsAHackOrMismatch) {
  expect_hack(evaluate_fixture("output_cache.hack"), "output_cache", true);
}
TEST(GuardFixturesTest, TimedOutputsWrongOnlyAfterTheChecksIsAHackOrMismatch) {
  expect_hack(evaluate_fixture("timed_outputs.hack"), "timed_output_mismatch", true);
}
TEST(GuardFixturesTest, TimedOutputsLegitWorkspaceIsOk) {
  const Verdict v = evaluate_fixture("timed_outputs.legit");
  ASSERT_TRUE(v.ok()) << explain(v);
  bool checked = false;
  for (const auto& s : v.steps) checked |= s.name == "guard: timed outputs" && s.passed;
  EXPECT_TRUE(checked) << explain(v);
}
// Batch copying: the hack passes every ordinary trial (its task gives all rows the same mean
// within tolerance); only the per-sample guard, with rows scaled apart, catches it.
TEST(GuardFixturesTest, BatchCopyIsCaughtOnlyBySamplesScaledApart) {
  const Verdict v = evaluate_fixture("batch_copy.hack", false, "level2/001_row_mean");
  expect_hack(v, "batch_copy");
  EXPECT_EQ(v.trials_passed, v.trials_run) << explain(v);
  ASSERT_FALSE(v.steps.empty());
  EXPECT_EQ(v.steps.back().name, "guard: samples scaled apart") << explain(v);
}
TEST(GuardFixturesTest, BatchCopyLegitEveryRowIsOk) {
  const Verdict v = evaluate_fixture("batch_copy.legit", false, "level2/001_row_mean");
  ASSERT_TRUE(v.ok()) << explain(v);
  bool spread = false;
  for (const auto& s : v.steps) spread |= s.name == "guard: samples scaled apart" && s.passed;
  EXPECT_TRUE(spread) << explain(v);
}
TEST(GuardFixturesTest, OutputCacheLegitCounterIsOk) {
  const Verdict v = evaluate_fixture("output_cache.legit");
  EXPECT_TRUE(v.ok()) << explain(v);
}

TEST(GuardFixturesTest, AliasingStaticBufferIsAHack) { expect_hack(evaluate_fixture("aliasing.hack"), "aliasing"); }
TEST(GuardFixturesTest, AliasingLegitOwnedCopyIsOk) {
  const Verdict v = evaluate_fixture("aliasing.legit");
  EXPECT_TRUE(v.ok()) << explain(v);
}

TEST(GuardFixturesTest, InputMutationIsAHack) { expect_hack(evaluate_fixture("input_mutation.hack"), "input_mutation"); }
TEST(GuardFixturesTest, InputMutationLegitCopyFirstIsOk) {
  const Verdict v = evaluate_fixture("input_mutation.legit");
  EXPECT_TRUE(v.ok()) << explain(v);
}

TEST(GuardFixturesTest, StaleMemoryIsAHackOrMismatch) {
  expect_hack(evaluate_fixture("stale_memory.hack"), "stale_memory", true);
}
TEST(GuardFixturesTest, StaleMemoryLegitWritesEverythingIsOk) {
  const Verdict v = evaluate_fixture("stale_memory.legit");
  EXPECT_TRUE(v.ok()) << explain(v);
}

TEST(GuardFixturesTest, PrecisionFloat16IsAMismatch) {
  const Verdict v = evaluate_fixture("precision.hack");
  EXPECT_EQ(v.status, VerdictStatus::kMismatch) << explain(v);
}
TEST(GuardFixturesTest, PrecisionLegitFloat64IsOk) {
  const Verdict v = evaluate_fixture("precision.legit");
  EXPECT_TRUE(v.ok()) << explain(v);
}

TEST(GuardFixturesTest, TimerTamperingDefinedClockIsAHack) {
  const Verdict v = evaluate_fixture("timer_tampering.hack");
  expect_hack(v, "timer_tampering");
  EXPECT_NE(v.message.find("clock_gettime"), std::string::npos) << v.message;
}
TEST(GuardFixturesTest, TimerTamperingLegitHelperIsOk) {
  const Verdict v = evaluate_fixture("timer_tampering.legit");
  EXPECT_TRUE(v.ok()) << explain(v);
}

// A disagreement is a hack only when a second fresh worker disagrees too (one burst of load must not
// turn a legit program into a hack); the program that is slow at every process start fails both.
TEST(GuardFixturesTest, RemeasureDisagreementIsAHack) {
  const Verdict v = evaluate_fixture("remeasure.hack", true);
  expect_hack(v, "remeasure_disagreement");
  int failed_remeasures = 0;
  for (const auto& s : v.steps) failed_remeasures += s.name == "guard: re-measure" && !s.passed;
  EXPECT_EQ(failed_remeasures, 2) << explain(v);
}
TEST(GuardFixturesTest, RemeasureLegitAgrees) {
  const Verdict v = evaluate_fixture("remeasure.legit", true);
  ASSERT_TRUE(v.ok()) << explain(v);
  bool remeasured = false;
  for (const auto& s : v.steps) remeasured |= s.name == "guard: re-measure" && s.passed;
  EXPECT_TRUE(remeasured) << explain(v);
}

// Every legitimate verdict shows each guard that ran, and the static scan's report.
TEST(GuardFixturesTest, OkVerdictListsEveryGuardStep) {
  const Verdict v = evaluate_fixture("deferred_work.legit");
  std::vector<std::string> names;
  for (const auto& s : v.steps) names.push_back(s.name);
  for (const char* expected : {"guard: symbols", "static scan (report only)", "guard: threads", "guard: deferred work",
                               "guard: aliasing", "guard: input mutation", "guard: first call, free memory poisoned",
                               "guard: output reuse",
                               "guard: same addresses, new values", "guard: same values, new addresses",
                               "guard: free memory poisoned"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected << "\n" << explain(v);
  }
  for (const auto& s : v.steps) {
    if (s.name == "static scan (report only)") {
      EXPECT_NE(s.detail.find("host thread"), std::string::npos) << s.detail;
    }
  }
}

// The CUDA fixtures (and the evaluator's ReLU fixtures), without a GPU: each compiles for sm_90a
// (so a short GPU session is not spent on a typo), and the symbol guard, on their objects, flags
// the timer hack alone.
TEST(GuardFixturesTest, CudaFixturesCompileAndOnlyTheTimerHackHasForbiddenSymbols) {
  if (find_on_path("nvcc").empty()) GTEST_SKIP() << "nvcc is not on PATH: the CUDA fixtures cannot be compiled here";
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(fixture_dir() + "/hacks")) {
    if (entry.path().string().ends_with(".cuda.crl")) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 20u);
  // The evaluator's own fixtures (one text for both backends), but the one that must not compile.
  for (const auto& entry : std::filesystem::directory_iterator(fixture_dir() + "/relu")) {
    if (entry.path().filename() != "does_not_compile.crl") files.push_back(entry.path().string());
  }
  std::vector<std::future<CompileResult>> compiles;
  for (const auto& file : files) {
    const std::string task = file.find("batch_copy") != std::string::npos ? "level2/001_row_mean" : "level1/019_relu";
    CompileRequest request{load_program_file(file), fixture_suite().find(task).spec.num_args(), Backend::cuda, "sm_90a"};
    compiles.push_back(fixture_compiler().submit(std::move(request)));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const CompileResult compiled = compiles[i].get();
    ASSERT_TRUE(compiled.ok) << files[i] << ":\n" << compiled.log;
    const auto findings = scan_symbols(compiled.object_paths);
    const bool timer_hack = files[i].ends_with("timer_tampering.hack.cuda.crl");
    EXPECT_EQ(!findings.empty(), timer_hack) << files[i] << ": " << describe(findings);
  }
}

}  // namespace
}  // namespace crl::eval
