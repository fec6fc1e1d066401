// The evaluator end to end on the CPU backend (the reference judged against itself is in
// self_judgement_test.cpp, which runs alone): wrong, non-compiling, crashing, hanging, throwing, exiting and memory-hungry
// candidates get their status, and the same evaluator goes on to judge the next one correctly.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "eval_fixtures.h"

namespace crl::eval {
namespace {

using testing::explain;
using testing::fixture_compiler;
using testing::fixture_suite;
using testing::quick_options;
using testing::relu_candidate;

class CpuEvaluatorTest : public ::testing::Test {
 protected:
  static Evaluator& evaluator() {
    static Evaluator e(quick_options(Backend::cpu), fixture_compiler());
    return e;
  }
  static Verdict evaluate(const std::string& fixture) {
    return evaluator().evaluate(fixture_suite().find("level1/019_relu"), relu_candidate(fixture), fixture);
  }
};

// Scalars everywhere (a 0-dim parameter, a 0-dim output): every guard handles them. They once
// made the guards throw, so every loss in the suite was a runtime_error even for its reference.
TEST_F(CpuEvaluatorTest, ScalarParameterAndOutputTaskIsOkForItsReference) {
  const Task& task = fixture_suite().find("level1/094_scaled_mse");
  const Verdict v = evaluator().evaluate(task, task.program, "reference");
  EXPECT_EQ(v.status, VerdictStatus::kOk) << explain(v);
  bool guarded = false;
  for (const auto& s : v.steps) guarded |= s.name == "guard: input mutation" && s.passed;
  EXPECT_TRUE(guarded) << explain(v);
}

TEST_F(CpuEvaluatorTest, DeviceSectionLoopIsOk) {
  const Verdict v = evaluate("device_loop");
  EXPECT_EQ(v.status, VerdictStatus::kOk) << explain(v);
  EXPECT_GT(v.speedup, 0);
}

// EvalOptions::min_batch_us: the judge times the reference's call and a timed batch gets enough
// slots (calls) to last that long, up to max_batch_calls; without it, the slots that exceed the
// caches (the small ReLU's 128 KiB inputs: max_slots).
TEST(CpuEvaluatorBatchSize, BatchesAreSizedToLastMinBatchUsWithinMaxBatchCalls) {
  const auto judge_detail = [](EvalOptions o) {
    Evaluator e(o, fixture_compiler());
    const Verdict v = e.evaluate(fixture_suite().find("level1/019_relu"), relu_candidate("same_as_reference"), "sized");
    EXPECT_TRUE(v.ok()) << explain(v);
    return v.steps.empty() ? std::string() : v.steps.front().detail;
  };
  EvalOptions o = quick_options(Backend::cpu);
  o.time_budget_seconds = 0.3;
  o.max_slots = 8;
  o.min_batch_us = 1e6;  // far longer than 24 small calls take
  o.max_batch_calls = 24;
  const std::string sized = judge_detail(o);
  EXPECT_NE(sized.find("24 input slots per timed batch (the reference's call: "), std::string::npos) << sized;
  o.min_batch_us = 0;
  const std::string unsized = judge_detail(o);
  EXPECT_NE(unsized.find("8 input slots per timed batch"), std::string::npos) << unsized;
  EXPECT_EQ(unsized.find("the reference's call"), std::string::npos) << unsized;
  o.max_batch_calls = 0;
  EXPECT_THROW(Evaluator(o, fixture_compiler()), InputError);
}

// The judge, the reference's timing worker and the candidate's worker share one card: planned per
// task by default (every share 0); shares set by hand add up to the budget at most, and a larger
// sum is refused naming all three.
TEST(EvalOptionsTest, GpuMemorySharesAddUpToOneBudget) {
  EvalOptions o = quick_options(Backend::cpu);
  EXPECT_EQ(o.gpu_memory_fraction + o.reference_gpu_memory_fraction + o.judge_gpu_memory_fraction, 0);
  EXPECT_NO_THROW(Evaluator(o, fixture_compiler()));
  o.gpu_memory_fraction = 0.6;  // the old default, beside the old 0.25 of the reference worker and the judge
  o.reference_gpu_memory_fraction = 0.25;
  o.judge_gpu_memory_fraction = 0.25;
  try {
    Evaluator rejected(o, fixture_compiler());
    ADD_FAILURE() << "shares adding up to 1.1 were accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("add up to 1.10 (candidate 0.6, reference 0.25, judge 0.25)"), std::string::npos) << e.what();
  }
  o.gpu_memory_fraction = -0.1;
  EXPECT_THROW(Evaluator(o, fixture_compiler()), InputError);
  o.gpu_memory_fraction = 0;
  o.gpu_memory_budget = 1.0;  // nothing left for the CUDA contexts
  EXPECT_THROW(Evaluator(o, fixture_compiler()), InputError);
}

// crl eval --compile-ahead: a candidate whose compile was started ahead is joined (or found in the
// cache) by evaluate(), never compiled a second time. The text is new, so no earlier run cached it.
TEST_F(CpuEvaluatorTest, CandidateCompiledAheadIsNotCompiledAgain) {
  ProgramText program = relu_candidate("device_loop");
  program.host.text += fmt::format("// compiled ahead {}\n", std::chrono::system_clock::now().time_since_epoch().count());
  const Task& task = fixture_suite().find("level1/019_relu");
  evaluator().compile_ahead(task, program);
  const Verdict v = evaluator().evaluate(task, program, "compiled ahead");
  EXPECT_TRUE(v.ok()) << explain(v);
  ASSERT_GE(v.steps.size(), 2u);
  EXPECT_EQ(v.steps[1].name, "compile");
  // A hit, naming the host compiler that built it (the cache key includes it).
  EXPECT_EQ(v.steps[1].detail, fmt::format("cache hit (host sections: {})",
                                           std::filesystem::path(fixture_compiler().host_cxx()).filename().string()))
      << explain(v);
}

// evaluate_all keeps the jobs' order and judges each one from its compile-ahead, not a new compile.
TEST_F(CpuEvaluatorTest, EvaluateAllJudgesInOrderWithCompilesAhead) {
  const Task& task = fixture_suite().find("level1/019_relu");
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  std::vector<Evaluator::Job> jobs;
  for (const char* fixture : {"device_loop", "wrong_values"}) {
    ProgramText program = relu_candidate(fixture);
    program.host.text += fmt::format("// evaluate_all {} {}\n", fixture, now);
    jobs.push_back({&task, std::move(program), fixture});
  }
  const std::vector<Verdict> verdicts = evaluator().evaluate_all(jobs, 1);
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_EQ(verdicts[0].candidate, "device_loop");
  EXPECT_TRUE(verdicts[0].ok()) << explain(verdicts[0]);
  EXPECT_EQ(verdicts[1].candidate, "wrong_values");
  EXPECT_EQ(verdicts[1].status, VerdictStatus::kMismatch);
  for (const Verdict& v : verdicts) EXPECT_TRUE(v.steps.at(1).detail.starts_with("cache hit (")) << explain(v);
}

TEST_F(CpuEvaluatorTest, SlowerCandidateHasSpeedupBelowOne) {
  const Verdict v = evaluate("slower");
  ASSERT_EQ(v.status, VerdictStatus::kOk) << explain(v);
  EXPECT_LT(v.speedup_ci_high, 0.8) << explain(v);
  EXPECT_LT(v.reward, 0.8);
}

// EvalOptions::slow_stop_speedup: once the budget is spent, a candidate whose interval lies wholly
// below 0.5 stops after min_timed_pairs_when_slow pairs; one as fast as the reference gets its
// min_timed_pairs. The timing step also says where a pair's untimed time went.
TEST(CpuEvaluatorSlowStop, AClearlySlowerCandidateStopsTimingOnceTheBudgetIsSpent) {
  EvalOptions o = quick_options(Backend::cpu);
  o.time_budget_seconds = 0.05;  // spent before min_timed_pairs, for both programs
  Evaluator e(o, fixture_compiler());
  const auto evaluate = [&](const std::string& fixture) {
    return e.evaluate(fixture_suite().find("level1/019_relu"), relu_candidate(fixture), fixture);
  };
  const auto timing_of = [](const Verdict& v) {
    for (const auto& s : v.steps) {
      if (s.name == "timing") return s.detail;
    }
    return std::string();
  };
  const Verdict slow = evaluate("slower");
  ASSERT_EQ(slow.status, VerdictStatus::kOk) << explain(slow);
  const std::string slow_timing = timing_of(slow);
  EXPECT_NE(slow_timing.find("the candidate clearly slower"), std::string::npos) << slow_timing;
  const int slow_pairs = std::stoi(slow_timing);
  EXPECT_GE(slow_pairs, o.min_timed_pairs_when_slow) << slow_timing;
  EXPECT_LT(slow_pairs, o.min_timed_pairs) << slow_timing;
  EXPECT_LT(slow.speedup_ci_high, 0.5) << explain(slow);

  const Verdict same = evaluate("same_as_reference");
  ASSERT_EQ(same.status, VerdictStatus::kOk) << explain(same);
  const std::string same_timing = timing_of(same);
  EXPECT_EQ(same_timing.find("clearly slower"), std::string::npos) << same_timing;
  EXPECT_GE(std::stoi(same_timing), o.min_timed_pairs) << same_timing;
  EXPECT_NE(same_timing.find("ms a pair"), std::string::npos) << same_timing;
  EXPECT_NE(same_timing.find("fill "), std::string::npos) << same_timing;
}

TEST_F(CpuEvaluatorTest, WrongValuesAreAMismatchNamingTheWorstElement) {
  const Verdict v = evaluate("wrong_values");
  EXPECT_EQ(v.status, VerdictStatus::kMismatch) << explain(v);
  EXPECT_NE(v.message.find("worst at flat index"), std::string::npos) << v.message;
  EXPECT_EQ(v.reward, 0);
  EXPECT_EQ(v.trials_passed, 0);
}

TEST_F(CpuEvaluatorTest, WrongShapeIsAMismatch) {
  const Verdict v = evaluate("wrong_shape");
  EXPECT_EQ(v.status, VerdictStatus::kMismatch) << explain(v);
  EXPECT_NE(v.message.find("shape"), std::string::npos) << v.message;
}

TEST_F(CpuEvaluatorTest, NanOutputIsAMismatch) {
  EXPECT_EQ(evaluate("nan_output").status, VerdictStatus::kMismatch);
}

TEST_F(CpuEvaluatorTest, CompileErrorCarriesTheCompilerMessage) {
  const Verdict v = evaluate("does_not_compile");
  EXPECT_EQ(v.status, VerdictStatus::kCompileError) << explain(v);
  EXPECT_NE(v.compile_log.find("undeclared_tensor"), std::string::npos) << v.compile_log;
  EXPECT_EQ(v.reward, 0);
}

TEST_F(CpuEvaluatorTest, SegfaultIsACrashAndTheNextEvaluationStillWorks) {
  const Verdict v = evaluate("segfault");
  EXPECT_EQ(v.status, VerdictStatus::kCrash) << explain(v);
  EXPECT_NE(v.message.find("signal 11"), std::string::npos) << v.message;
  EXPECT_EQ(evaluate("same_as_reference").status, VerdictStatus::kOk);
}

TEST_F(CpuEvaluatorTest, InfiniteLoopIsATimeoutAndTheNextEvaluationStillWorks) {
  const auto start = std::chrono::steady_clock::now();
  const Verdict v = evaluate("infinite_loop");
  EXPECT_EQ(v.status, VerdictStatus::kTimeout) << explain(v);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_EQ(evaluate("device_loop").status, VerdictStatus::kOk);
}

TEST_F(CpuEvaluatorTest, ThrowingIsARuntimeErrorWithTheMessage) {
  const Verdict v = evaluate("throws");
  EXPECT_EQ(v.status, VerdictStatus::kRuntimeError) << explain(v);
  EXPECT_NE(v.message.find("expected a 5-d input"), std::string::npos) << v.message;
}

TEST_F(CpuEvaluatorTest, ExitInsideForwardIsACrash) {
  const Verdict v = evaluate("calls_exit");
  EXPECT_EQ(v.status, VerdictStatus::kCrash) << explain(v);
  EXPECT_NE(v.message.find("exited with code 0"), std::string::npos) << v.message;
}

TEST_F(CpuEvaluatorTest, MemoryHogHitsTheWorkerLimitNotTheMachine) {
  const Verdict v = evaluate("memory_hog");
  EXPECT_EQ(v.status, VerdictStatus::kRuntimeError) << explain(v);
}

TEST_F(CpuEvaluatorTest, VerdictSurvivesAJsonRoundTrip) {
  const Verdict v = evaluate("wrong_values");
  EXPECT_EQ(to_json(verdict_from_json(to_json(v))), to_json(v));
}

}  // namespace
}  // namespace crl::eval
