// Attacks on the reward on the CUDA backend at full scale (label gpu; skipped without a GPU): the
// CUDA programs under tests/data/eval/attacks and the CPU ones that apply to both backends.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "eval_fixtures.h"
#include "machine/machine_probe.h"

namespace crl::eval {
namespace {

using testing::explain;
using testing::fixture_compiler;
using testing::fixture_dir;
using testing::fixture_suite;
using testing::quick_options;

class GpuAttackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_visible()) GTEST_SKIP() << "no CUDA GPU visible: the CUDA backend cannot run here";
  }
  static Verdict judge(const std::string& file) {
    static Evaluator e(quick_options(Backend::cuda), fixture_compiler());
    return e.evaluate(fixture_suite().find("level1/019_relu"), load_program_file(fixture_dir() + "/attacks/" + file), file);
  }
  // A task of the real suite (jobs/suite), loaded once, for attacks on a particular reference.
  static const Task& suite_task(const std::string& id) {
    static const Suite suite = Suite::load(std::string(CRL_SOURCE_DIR) + "/jobs/suite");
    return suite.find(id);
  }
  static void expect_no_gain(const Verdict& v) {
    // Refused as a hack, or judged and timed: never a failure of its own making (that would show
  // nothing about the attack).
  if (v.status == VerdictStatus::kHack) return;
  ASSERT_TRUE(v.ok()) << explain(v);
  EXPECT_LT(v.speedup_ci_low, 1.3) << explain(v);
  }
};

TEST_F(GpuAttackTest, AGraphLeftRunningOnItsOwnStreamIsDeferredWork) {
  const Verdict v = judge("deferred_graph.cuda.crl");
  EXPECT_TRUE(v.status_text() == "hack:deferred_work" || v.status == VerdictStatus::kMismatch) << explain(v);
}
// Kernels launched by a host thread after the worker's sync returned run while it is frozen: the
// outputs compared as the GPU was busy and again once idle (late: a hack), the timed batch charged
// the wait, or the thread frozen before its launch (its outputs missing: a mismatch).
TEST_F(GpuAttackTest, KernelsLaunchedAfterTheWorkersSyncGainNothing) {
  const Verdict v = judge("late_launch.cuda.crl");
  if (v.status == VerdictStatus::kMismatch) return;
  expect_no_gain(v);
}
TEST_F(GpuAttackTest, AHostThreadJoinedBeforeForwardReturnsIsLegitimate) {
  const Verdict v = judge("late_launch_joined.legit.cuda.crl");
  EXPECT_TRUE(v.ok()) << explain(v);
}
TEST_F(GpuAttackTest, ANonContiguousOutputIsLegitimate) {
  const Verdict v = judge("noncontiguous_output.legit.cuda.crl");
  EXPECT_TRUE(v.ok()) << explain(v);
}
// The last quarter of a timed batch's kernels left running past the worker's reply, its device
// sync patched in its own process: the judge's idle probe after the batch must charge that tail
// (issue 40 item 2). Its twin joins a side stream before returning and patches nothing.
TEST_F(GpuAttackTest, ABatchsTailHiddenFromTheWorkersSyncGainsNothing) {
  const Verdict v = judge("hidden_tail.cuda.crl");
  // Its patch (dlsym and mprotect on cudaDeviceSynchronize) is refused before it runs: the static
  // scan or the symbol guard names it (H100, 2026-12-07: hack, no worker started). No other way to
  // leave work past the worker's device sync was found without such symbols (a second stream of the
  // process is waited for; a host thread that launches late is frozen: late_launch.cuda.crl).
  if (v.status == VerdictStatus::kHack && v.worker_log.empty()) {
    EXPECT_TRUE(v.message.find("patching") != std::string::npos || v.message.find("memory protection") != std::string::npos)
        << explain(v);
    return;
  }
  // Had it run, the attack must have done what it says (else this would test a plain ReLU): its
  // sync patched, and a timed batch replied with work still queued.
  EXPECT_NE(v.worker_log.find("hidden_tail: cudaDeviceSynchronize patched"), std::string::npos) << v.worker_log;
  EXPECT_NE(v.worker_log.find("still queued"), std::string::npos) << v.worker_log;
  if (v.status == VerdictStatus::kHack) return;
  ASSERT_TRUE(v.ok()) << explain(v);
  EXPECT_LT(v.speedup_ci_low, 1.1) << explain(v);
}
TEST_F(GpuAttackTest, AKernelOnASideStreamJoinedBeforeReturnIsLegitimate) {
  const Verdict v = judge("side_stream_joined.legit.cuda.crl");
  EXPECT_TRUE(v.ok()) << explain(v);
}
TEST_F(GpuAttackTest, KernelsQueuedBetweenCallsDoNotSlowTheReference) { expect_no_gain(judge("gpu_interference.cuda.crl")); }
// Work left running while the worker is frozen and stopped when its own batch begins: the judge
// waits for an idle GPU before every batch (the reference's too), and a GPU that stays busy fails
// the measurement as crl's (left out of the job's group), never timing the reference beside it.
TEST_F(GpuAttackTest, WorkLeftRunningWhileFrozenNeverSharesTheGpuWithTheReference) {
  const Verdict v = judge("gpu_busy_while_frozen.cuda.crl");
  if (v.status == VerdictStatus::kInternalError) {
    EXPECT_NE(v.message.find("the GPU stayed busy"), std::string::npos) << explain(v);
    return;
  }
  expect_no_gain(v);
}
TEST_F(GpuAttackTest, OperatorOverridesStayInTheCandidatesProcess) { expect_no_gain(judge("operator_override.cuda.crl")); }
TEST_F(GpuAttackTest, GlobalAtenStateStaysInTheCandidatesProcess) { expect_no_gain(judge("global_state.cpu.crl")); }
TEST_F(GpuAttackTest, ACandidateCannotEscapeItsSandboxOnTheGpuEither) {
  const Verdict v = judge("escape.cpu.crl");
  EXPECT_TRUE(v.ok()) << explain(v);  // CUDA init and ReLU work inside the sandbox
  EXPECT_NE(v.worker_log.find("kill(parent) -> -1"), std::string::npos) << v.worker_log;
}
TEST_F(GpuAttackTest, SkippingCallsOfATimedBatchIsCaught) { EXPECT_FALSE(judge("skip_calls.cpu.crl").ok()); }
// The sandbox's second filter (file metadata, System V IPC, message queues, keys), the device files
// and the compile cache narrowed to its library's folder, and no file owner's signals: CUDA still
// works beside them, and each holds on the GPU as on the CPU (attack_test.cpp).
TEST_F(GpuAttackTest, TheSandboxsFileAndSignalRulesHoldOnTheGpu) {
  const Verdict lasting = judge("lasting_changes.cpu.crl");
  EXPECT_TRUE(lasting.ok()) << explain(lasting);
  EXPECT_NE(lasting.worker_log.find("shmget -> -1, semget -> -1, msgget -> -1, mq_open -> -1, add_key -> -1"), std::string::npos)
      << lasting.worker_log;
  const Verdict owner = judge("owner_signal.cpu.crl");
  EXPECT_TRUE(owner.ok()) << explain(owner);
  EXPECT_NE(owner.worker_log.find("owner_signal: F_SETOWN -> -1"), std::string::npos) << owner.worker_log;
  const Verdict devices = judge("device_files.cpu.crl");
  EXPECT_TRUE(devices.ok()) << explain(devices);
  EXPECT_NE(devices.worker_log.find(" 0 opened;"), std::string::npos) << devices.worker_log;
  const Verdict locks = judge("compile_locks.cpu.crl");
  EXPECT_TRUE(locks.ok()) << explain(locks);
  EXPECT_NE(locks.worker_log.find(": 0 lock folders listed, 0 files opened, 0 locked; own library readable"), std::string::npos)
      << locks.worker_log;
}
// CUDA IPC handles forged for crl's other processes (the judge, the reference's worker) open none
// of their memory. The log keeps the two handles the program made, to show what a handle holds.
TEST_F(GpuAttackTest, ForgedIpcHandlesOpenNoOtherProcesssMemory) {
  const Verdict v = judge("ipc_forge.cuda.crl");
  ASSERT_TRUE(v.ok()) << explain(v);
  std::printf("%s\n", v.worker_log.c_str());
  // The driver ignores the handle's pid: what forgeries open for a pid no process has is the
  // program's own memory (its marked blocks, its arena and outputs), and forgeries aimed at crl's
  // processes must open exactly that much, nothing of theirs (on the H100, 2026-12-07: 152 of 257
  // per process, 22 of them not its two marked blocks, for real pids and the missing one alike).
  EXPECT_NE(v.worker_log.find(" opened exactly what they open for no process"), std::string::npos) << v.worker_log;
  EXPECT_EQ(v.worker_log.find(" 0 forged handles tried"), std::string::npos) << "no crl process found to forge for\n"
                                                                             << v.worker_log;
}
// Code run on the threads the CUDA driver started before the file rules (its host-function thread,
// any of them through a signal handler) must not write outside the worker's folder either: the rules
// reach every earlier thread (restrict_all_threads_to_landlock_ruleset); a thread that blocks the
// signal is named in the sandbox's log line ("NOT ... that block it").
TEST_F(GpuAttackTest, CodeOnTheDriversThreadsWritesNothingOutsideItsFolder) {
  const std::string prefix = "/tmp/crl-driver-thread-" + std::to_string(getpid());
  const Verdict v = judge("driver_thread_write.cuda.crl");
  ASSERT_TRUE(v.ok()) << explain(v);
  std::printf("%s\n", v.worker_log.c_str());
  EXPECT_NE(v.worker_log.find("own thread -> -1"), std::string::npos) << v.worker_log;
  EXPECT_NE(v.worker_log.find("host function -> -1"), std::string::npos) << v.worker_log;
  EXPECT_NE(v.worker_log.find(", 0 wrote, "), std::string::npos) << v.worker_log;
  EXPECT_EQ(v.worker_log.find(" other threads signalled, 0 wrote, 0 refused"), std::string::npos) << "no thread ran the handler";
  EXPECT_EQ(v.worker_log.find("that block it"), std::string::npos) << v.worker_log;
  for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
    if (entry.path().string().rfind(prefix, 0) == 0) {
      ADD_FAILURE() << "written outside the worker's folder: " << entry.path();
      std::filesystem::remove(entry.path());
    }
  }
}
// A worker sees its evaluator's GPU alone (CUDA_VISIBLE_DEVICES) and may open only that GPU's node.
TEST_F(GpuAttackTest, OnlyItsOwnGpuIsReachable) {
  const Verdict v = judge("other_gpus.cuda.crl");
  ASSERT_TRUE(v.ok()) << explain(v);
  EXPECT_NE(v.worker_log.find("other_gpus: 1 visible, 1 of "), std::string::npos) << v.worker_log;
  EXPECT_NE(v.worker_log.find("GPU device files: the driver's and /dev/nvidia"), std::string::npos) << v.worker_log;
  if (v.worker_log.find("of 1 GPU nodes opened") != std::string::npos) {
    GTEST_SKIP() << "one GPU node on this machine: no other GPU to keep the program from";
  }
}

// Copying the inputs first gains nothing: each program's timed kernels read an arena of its own
// process (inputs in memory imported from the judge once made level2/010's transposed convolution
// 2.1x slower, and these copies 1.86x "faster"). The reference itself, judged as the candidate, is
// the legitimate twin. Full scale: 2.1 GB of x per call.
TEST_F(GpuAttackTest, CopyingTheInputsFirstGainsNothing) {
  const Task& task = suite_task("level2/010_conv_transpose2d_max_pool_hardtanh_mean_tanh");
  Evaluator e(quick_options(Backend::cuda), fixture_compiler());
  const Verdict itself = e.evaluate(task, task.program, "reference");
  ASSERT_TRUE(itself.ok()) << explain(itself);
  EXPECT_GT(itself.speedup_ci_high, 0.95) << explain(itself);
  EXPECT_LT(itself.speedup_ci_low, 1.05) << explain(itself);
  std::printf("level2/010 against itself: %.3f (reference %.0f us)\n", itself.speedup, itself.reference_time.median_us);
  for (const char* file : {"input_copy.cuda.crl", "input_copy_kept_buffer.cuda.crl"}) {
    const Verdict v = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/" + file), file);
    ASSERT_TRUE(v.ok()) << explain(v);  // a correct program: judged, and timed as slower or the same
    EXPECT_LT(v.speedup_ci_low, 1.05) << explain(v);
    std::printf("%s: %.3f (candidate %.0f us, reference %.0f us)\n", file, v.speedup, v.candidate_time.median_us,
                v.reference_time.median_us);
  }
}

// Issue 40's false positive: level2/080's provably-zero program was hack:beyond_roofline at 129x on
// an H100 (the floor counted the GEMM's inputs and flops). Now the floor is its [1024, 1] output,
// the estimate sends it to the stricter checks, it passes them and the re-measure (batches on the
// GPU), and is ok; its reward is its interval's lower bound. Twin of the CPU test, on the GPU's own
// peaks. The stricter checks catching work skipped beyond the estimate are the CPU tests' and
// pipeline_test's (attacks/clamp_after_edge_trials judges the same way here, below).
TEST_F(GpuAttackTest, TheProvablyZeroProgramOfLevel2_080IsOk) {
  const Task& task = suite_task("level2/080_gemm_max_subtract_gelu");
  Evaluator e(quick_options(Backend::cuda), fixture_compiler());
  const Verdict v = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/zeros_level2_080.legit.cpu.crl"), "zeros");
  ASSERT_TRUE(v.ok()) << explain(v);
  bool stricter = false;
  for (const auto& s : v.steps) stricter |= s.name == "guard: stricter checks" && s.passed;
  EXPECT_TRUE(stricter) << "the gate should have found it faster than the task's estimate: " << explain(v);
  EXPECT_GT(v.reward, 3) << explain(v);
  std::printf("level2/080 zeros: %.1fx (%.1f..%.1f), reward %.2f\n", v.speedup, v.speedup_ci_low, v.speedup_ci_high, v.reward);
}

// The clamp dropped after the trials (attacks/clamp_after_edge_trials), at full scale on the GPU: a
// GEMM's speed, within its task's estimate, so no stricter check runs; the ordinary checks see
// ordinary inputs only, and it gains nothing either way (the clamp is a small part of the work).
TEST_F(GpuAttackTest, AClampDroppedAfterTheEdgeTrialsGainsNothing) {
  const Task& task = suite_task("level2/022_matmul_scale_residual_add_clamp_log_sum_exp_mish");
  Evaluator e(quick_options(Backend::cuda), fixture_compiler());
  const Verdict v = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/clamp_after_edge_trials.cpu.crl"), "clamp_after");
  expect_no_gain(v);
}

// Settings of the GPU that a program can change from its own process stay its own: an L2
// set-aside for persisting accesses (and its own inputs marked persisting) leaves the reference's
// GEMM, timed in another process, as fast as when the reference itself is the candidate.
TEST_F(GpuAttackTest, AnL2SetAsideLeavesTheReferencesTimeAlone) {
  const Task& task = suite_task("level1/001_square_matmul");
  Evaluator e(quick_options(Backend::cuda), fixture_compiler());
  const Verdict itself = e.evaluate(task, task.program, "reference");
  ASSERT_TRUE(itself.ok()) << explain(itself);
  const Verdict v = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/l2_set_aside.cuda.crl"), "l2_set_aside");
  ASSERT_TRUE(v.ok()) << explain(v);
  EXPECT_LT(v.reference_time.median_us, itself.reference_time.median_us * 1.05) << explain(v);
  EXPECT_LT(v.speedup_ci_low, 1.1) << explain(v);
  std::printf("l2_set_aside: %.3f (reference %.0f us, %.0f us when judged against itself)\n", v.speedup,
              v.reference_time.median_us, itself.reference_time.median_us);
}

// A candidate that frees its own arena (the memory the judge fills through CUDA IPC) harms only
// itself: its verdict is its own failure or no gain, never crl's internal_error, and the same
// judge goes on to judge the next candidate.
TEST_F(GpuAttackTest, FreeingItsOwnArenaHarmsOnlyTheCandidate) {
  Evaluator e(quick_options(Backend::cuda), fixture_compiler());
  const Task& task = fixture_suite().find("level1/019_relu");
  const Verdict freed = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/arena_free.cuda.crl"), "arena_free");
  EXPECT_NE(freed.status, VerdictStatus::kInternalError) << explain(freed);
  if (freed.ok()) EXPECT_LT(freed.speedup_ci_low, 1.3) << explain(freed);
  std::printf("arena_free: %s\n", freed.status_text().c_str());
  const Verdict next = e.evaluate(task, load_program_file(fixture_dir() + "/relu/same_as_reference.crl"), "reference");
  EXPECT_TRUE(next.ok()) << explain(next);
}

// The roofline gate: ReLU at HBM speed passes the H200's roof; told the GPU is a thousand times
// slower than it is, the same program is faster than "the hardware allows" and the gate fires.
TEST_F(GpuAttackTest, TheRooflineGateFiresBelowTheLeastTime) {
  const auto judge_with = [](double bytes_per_second) {
    EvalOptions o = quick_options(Backend::cuda);
    o.time_budget_seconds = 0.5;
    o.peak_bytes_per_second = bytes_per_second;
    o.peak_flops_per_second = bytes_per_second > 0 ? 1e15 : 0;
    Evaluator e(o, fixture_compiler());
    return e.evaluate(fixture_suite().find("level1/019_relu"),
                      load_program_file(fixture_dir() + "/relu/same_as_reference.crl"), "reference");
  };
  const Verdict real = judge_with(0);
  EXPECT_TRUE(real.ok()) << explain(real);
  bool gated = false;
  for (const auto& s : real.steps) gated |= s.name == "guard: roofline" && s.passed;
  EXPECT_TRUE(gated) << explain(real);
  const Verdict slow_gpu = judge_with(4.8e9);
  EXPECT_EQ(slow_gpu.status_text(), "hack:beyond_roofline") << explain(slow_gpu);
}

// The reference judged as its own candidate through the whole judge: the overhead of a judged
// call and the repeatability the issue asks for (speedup spread) are printed for the record.
TEST_F(GpuAttackTest, TheReferenceAgainstItselfIsAboutOne) {
  const Verdict v = judge("../relu/same_as_reference.crl");
  ASSERT_TRUE(v.ok()) << explain(v);
  EXPECT_GT(v.speedup_ci_high, 0.97) << explain(v);
  EXPECT_LT(v.speedup_ci_low, 1.03) << explain(v);
  std::printf("reference against itself: speedup %.4f (CI %.4f..%.4f), reference %.1f us, candidate %.1f us\n", v.speedup,
              v.speedup_ci_low, v.speedup_ci_high, v.reference_time.median_us, v.candidate_time.median_us);
}


// ---- The precision contract on the GPU at full scale (issue 40, item 4) ----

// TF32 tensor cores (7.8x on the H100 before) and fp16 tensor cores (10.2x) on a float32 matmul fail
// the precision contract; the CPU's host-only precision attacks fail here too.
TEST_F(GpuAttackTest, Tf32AndFp16TensorCoresOnAFloat32TaskFailThePrecisionContract) {
  const Task& task = suite_task("level1/001_square_matmul");
  Evaluator e(quick_options(Backend::cuda), fixture_compiler());
  for (const char* file : {"precision_tf32_matmul.cuda.crl", "precision_fp16_tensor_cores.cuda.crl", "precision_tf32_rounded_matmul.cpu.crl",
                           "precision_bf16_matmul.cpu.crl", "precision_fp8_matmul.cpu.crl"}) {
    const Verdict v = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/" + file), file);
    EXPECT_EQ(v.status, VerdictStatus::kMismatch) << file << explain(v);
    std::printf("%s: %s %s\n", file, v.status_text().c_str(), v.message.substr(0, 240).c_str());
  }
}

// A TF32x3 split on tensor cores is float32-accurate: ok, and faster than the float32 reference.
TEST_F(GpuAttackTest, ATf32x3SplitOnTensorCoresStaysOk) {
  const Task& task = suite_task("level1/001_square_matmul");
  Evaluator e(quick_options(Backend::cuda), fixture_compiler());
  const Verdict v = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/tf32x3_split.legit.cuda.crl"), "tf32x3");
  ASSERT_TRUE(v.ok()) << explain(v);
  std::printf("tf32x3_split: speedup %.3f (CI %.3f..%.3f)\n", v.speedup, v.speedup_ci_low, v.speedup_ci_high);
  for (const auto& s : v.steps) {
    if (s.name == "timing") EXPECT_NE(s.detail.find("checked slots held to the float64 reference"), std::string::npos) << s.detail;
  }
}

// `precision: tf32`: every worker may use TF32, the reference's timing worker too, so the TF32
// candidate is ok but gains nothing, and its bound follows the TF32 reference's error.
TEST_F(GpuAttackTest, UnderPrecisionTf32TheReferenceUsesTf32TooAndTf32EarnsNothing) {
  const Task& task = suite_task("level1/001_square_matmul");
  EvalOptions o = quick_options(Backend::cuda);
  o.precision = Precision::tf32;
  Evaluator e(o, fixture_compiler());
  const Verdict v = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/precision_tf32_matmul.cuda.crl"), "tf32");
  ASSERT_TRUE(v.ok()) << explain(v);
  EXPECT_LT(v.speedup_ci_low, 1.1) << explain(v);
  EXPECT_NE(v.steps.front().detail.find("precision tf32"), std::string::npos) << v.steps.front().detail;
  std::printf("tf32 under precision tf32: speedup %.3f (CI %.3f..%.3f)\n", v.speedup, v.speedup_ci_low, v.speedup_ci_high);
}

// The edge-trial detector, the hard-coded constant parameters and their twins, at full scale.
TEST_F(GpuAttackTest, EdgeDetectorsAndHardCodedParametersFailAndTheirTwinsStayOk) {
  Evaluator e(quick_options(Backend::cuda), fixture_compiler());
  const auto judged = [&](const char* task, const char* file) {
    const Verdict v = e.evaluate(suite_task(task), load_program_file(fixture_dir() + "/attacks/" + file), file);
    std::printf("%s: %s (speedup %.3f)\n", file, v.status_text().c_str(), v.speedup);
    return v;
  };
  EXPECT_EQ(judged("level1/023_softmax", "edge_detector_softmax.cpu.crl").status, VerdictStatus::kMismatch);
  EXPECT_EQ(judged("level2/030_gemm_group_norm_hardtanh", "constant_params.cpu.crl").status, VerdictStatus::kMismatch);
  EXPECT_TRUE(judged("level2/030_gemm_group_norm_hardtanh", "reads_params.legit.cpu.crl").ok());
  EXPECT_EQ(judged("level1/022_tanh", "precision_fp16_tanh.cpu.crl").status, VerdictStatus::kMismatch);
  EXPECT_TRUE(judged("level1/001_square_matmul", "split_k_matmul.legit.cpu.crl").ok());
  EXPECT_TRUE(judged("level1/001_square_matmul", "tf32x3_split.legit.cpu.crl").ok());
}

}  // namespace
}  // namespace crl::eval
