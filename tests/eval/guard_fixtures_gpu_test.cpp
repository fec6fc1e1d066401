// Hack guards end to end on the CUDA backend at full scale (label gpu; skipped without a GPU):
// every *.cuda.crl fixture under tests/data/eval/hacks; hacks get hack:<kind> (or mismatch where
// stated), never ok; legitimate programs of similar shape get ok.
#include <gtest/gtest.h>

#if CRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "eval_fixtures.h"
#include "machine/machine_probe.h"

namespace crl::eval {
namespace {

using testing::explain;
using testing::expect_hack;
using testing::fixture_compiler;
using testing::fixture_dir;
using testing::fixture_suite;
using testing::quick_options;

bool have_gpu() { return cuda_device_visible(); }

class GpuGuardFixturesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU visible: the CUDA backend cannot run here";
  }
  static Verdict evaluate(const std::string& file, bool remeasure_everything = false,
                          const std::string& task = "level1/019_relu") {
    static Evaluator plain(quick_options(Backend::cuda), fixture_compiler());
    static Evaluator remeasuring(
        [] {
          EvalOptions o = quick_options(Backend::cuda);
          o.remeasure_above_speedup = 0;
          return o;
        }(),
        fixture_compiler());
    Evaluator& e = remeasure_everything ? remeasuring : plain;
    return e.evaluate(fixture_suite().find(task), load_program_file(fixture_dir() + "/hacks/" + file + ".cuda.crl"),
                      file);
  }
  static void expect_ok(const Verdict& v) { EXPECT_TRUE(v.ok()) << explain(v); }
};

TEST_F(GpuGuardFixturesTest, DeferredWorkOnOtherStream) { expect_hack(evaluate("deferred_work.hack"), "deferred_work"); }
TEST_F(GpuGuardFixturesTest, DeferredWorkLegit) { expect_ok(evaluate("deferred_work.legit")); }
TEST_F(GpuGuardFixturesTest, OutputCache) { expect_hack(evaluate("output_cache.hack"), "output_cache", true); }
TEST_F(GpuGuardFixturesTest, OutputCacheLegit) { expect_ok(evaluate("output_cache.legit")); }
TEST_F(GpuGuardFixturesTest, BatchCopy) {
  expect_hack(evaluate("batch_copy.hack", false, "level2/001_row_mean"), "batch_copy");
}
TEST_F(GpuGuardFixturesTest, BatchCopyLegit) { expect_ok(evaluate("batch_copy.legit", false, "level2/001_row_mean")); }
TEST_F(GpuGuardFixturesTest, TimedOutputs) {
  expect_hack(evaluate("timed_outputs.hack"), "timed_output_mismatch", true);
}
TEST_F(GpuGuardFixturesTest, TimedOutputsLegit) { expect_ok(evaluate("timed_outputs.legit")); }
TEST_F(GpuGuardFixturesTest, Aliasing) { expect_hack(evaluate("aliasing.hack"), "aliasing"); }
TEST_F(GpuGuardFixturesTest, AliasingLegit) { expect_ok(evaluate("aliasing.legit")); }
TEST_F(GpuGuardFixturesTest, InputMutation) { expect_hack(evaluate("input_mutation.hack"), "input_mutation"); }
TEST_F(GpuGuardFixturesTest, InputMutationLegit) { expect_ok(evaluate("input_mutation.legit")); }
TEST_F(GpuGuardFixturesTest, StaleMemory) { expect_hack(evaluate("stale_memory.hack"), "stale_memory", true); }
TEST_F(GpuGuardFixturesTest, StaleMemoryLegit) { expect_ok(evaluate("stale_memory.legit")); }
TEST_F(GpuGuardFixturesTest, Precision) { EXPECT_EQ(evaluate("precision.hack").status, VerdictStatus::kMismatch); }
TEST_F(GpuGuardFixturesTest, PrecisionLegit) { expect_ok(evaluate("precision.legit")); }
TEST_F(GpuGuardFixturesTest, TimerTampering) { expect_hack(evaluate("timer_tampering.hack"), "timer_tampering"); }
TEST_F(GpuGuardFixturesTest, TimerTamperingLegit) { expect_ok(evaluate("timer_tampering.legit")); }
TEST_F(GpuGuardFixturesTest, RemeasureDisagreement) {
  expect_hack(evaluate("remeasure.hack", true), "remeasure_disagreement");
}
TEST_F(GpuGuardFixturesTest, RemeasureLegit) { expect_ok(evaluate("remeasure.legit", true)); }

}  // namespace
}  // namespace crl::eval
