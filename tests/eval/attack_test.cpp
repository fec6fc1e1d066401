// Programs that attack the reward as an attacker would (tests/data/eval/attacks), each judged end
// to end on the CPU backend: none may get a speedup it did not earn, none may reach the evaluator
// or leave anything behind. Their legitimate twins are the ok fixtures of guard_fixtures_test and
// the *.legit.* files here.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "eval_fixtures.h"

namespace crl::eval {
namespace {

using testing::explain;
using testing::fixture_compiler;
using testing::fixture_dir;
using testing::fixture_suite;
using testing::quick_options;

Evaluator& evaluator() {
  static Evaluator e(quick_options(Backend::cpu), fixture_compiler());
  return e;
}

Verdict judge(const std::string& file) {
  return evaluator().evaluate(fixture_suite().find("level1/019_relu"),
                              load_program_file(fixture_dir() + "/attacks/" + file + ".cpu.crl"), file);
}

// No gain: not ok, or ok with a speedup whose interval does not lie clearly above what the same
// work (at::relu) earns, about 1.
void expect_no_gain(const Verdict& v) {
  // Refused as a hack, or judged and timed: never a failure of its own making (that would show
  // nothing about the attack).
  if (v.status == VerdictStatus::kHack) return;
  ASSERT_TRUE(v.ok()) << explain(v);
  EXPECT_LT(v.speedup_ci_low, 1.3) << explain(v);
}

TEST(AttackTest, SpinningThreadsDoNotSlowTheReference) { expect_no_gain(judge("interference")); }

TEST(AttackTest, GlobalAtenStateAndAllocatorStayInTheCandidatesProcess) { expect_no_gain(judge("global_state")); }

TEST(AttackTest, OperatorOverridesStayInTheCandidatesProcess) { expect_no_gain(judge("operator_override")); }

// Another process's scheduling (priority, class, I/O priority, CPUs), which the kernel lets any
// process of the same uid change, stays out of reach: named by pid, or as "every process of my
// uid" and "my group", or the parent through sched_setattr. Each call fails (the log says so), and
// the speedup is ReLU's, about 1. The twin sets its own scheduling through pid 0, and may.
TEST(AttackTest, ACandidateCannotChangeTheSchedulingOfOtherProcesses) {
  // With LibTorch's intra-op threads (one per core), `crl eval`'s default, under which the attack
  // was judged ok at 9.5x (how much it gains depends on what else the machine runs; the calls
  // succeeding, which the log shows, is the hole).
  EvalOptions o = quick_options(Backend::cpu);
  o.cpu_threads = 0;
  Evaluator threaded(o, fixture_compiler());
  const Verdict named = threaded.evaluate(fixture_suite().find("level1/019_relu"),
                                          load_program_file(fixture_dir() + "/attacks/scheduling.cpu.crl"), "scheduling");
  std::printf("scheduling: %s %s\n", named.status_text().c_str(), named.message.c_str());
  expect_no_gain(named);
  EXPECT_NE(named.worker_log.find("scheduling: pid "), std::string::npos) << named.worker_log;  // it found crl's processes
  EXPECT_EQ(named.worker_log.find("-> 0"), std::string::npos) << named.worker_log;
  const Verdict group = judge("scheduling_group");
  expect_no_gain(group);
  EXPECT_NE(group.worker_log.find("PRIO_USER -> -1, PRIO_PGRP -> -1, I/O user -> -1, I/O group -> -1, parent SCHED_IDLE -> -1"),
            std::string::npos)
      << group.worker_log;
  const Verdict own = judge("scheduling_self.legit");
  EXPECT_TRUE(own.ok()) << explain(own);
  EXPECT_NE(own.worker_log.find("own affinity -> 0, own policy -> 0"), std::string::npos) << own.worker_log;
}

// Run as root (CI machines, containers), the worker holds no capabilities once its sandbox is on:
// every set in /proc/self/status is empty, /dev/mem does not open, and the worker stays the
// out-of-memory killer's first choice.
TEST(AttackTest, ACandidatesWorkerHoldsNoCapabilities) {
  const Verdict v = judge("capabilities");
  expect_no_gain(v);
  // (an ordinary user's bounding set stays full: it shrinks only with CAP_SETPCAP, and matters only for execve)
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapAmb", geteuid() == 0 ? "CapBnd" : "CapEff"}) {
    EXPECT_NE(v.worker_log.find(std::string("capabilities: ") + set + ":\t0000000000000000"), std::string::npos)
        << set << "\n" << v.worker_log;
  }
  EXPECT_NE(v.worker_log.find("open(/dev/mem) -> -1"), std::string::npos) << v.worker_log;
  // First in line for the out-of-memory killer, and it cannot step out of it (that takes CAP_SYS_RESOURCE).
  EXPECT_NE(v.worker_log.find("lowering oom_score_adj -> refused; oom_score_adj 1000"), std::string::npos) << v.worker_log;
  if (geteuid() == 0) EXPECT_EQ(v.worker_log.find(" 0 capabilities dropped"), std::string::npos) << v.worker_log;
}

// No other process is reachable through a Unix socket: this test listens on one by path and one in
// the abstract namespace (as slurmstepd or a PMIx server would), and after the candidate tried
// every listening socket of the machine, neither has a connection waiting.
TEST(AttackTest, ACandidateCannotConnectToAnotherProcesssUnixSocket) {
  const auto listen_on = [](const std::string& name, bool abstract) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path + (abstract ? 1 : 0), name.c_str(), name.size());
    const auto length = static_cast<socklen_t>(sizeof(sa_family_t) + name.size() + (abstract ? 1 : 0));
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0) << name << ": " << std::strerror(errno);
    EXPECT_EQ(listen(fd, 8), 0);
    return fd;
  };
  const std::string path = fmt::format("/tmp/crl-attack-listener-{}.sock", getpid());
  std::filesystem::remove(path);
  const int by_path = listen_on(path, false);
  const int abstract = listen_on(fmt::format("crl-attack-listener-{}", getpid()), true);
  const Verdict v = judge("unix_socket");
  expect_no_gain(v);
  EXPECT_NE(v.worker_log.find("listening sockets tried, 0 connected"), std::string::npos) << v.worker_log;
  EXPECT_LT(accept(by_path, nullptr, nullptr), 0) << "the candidate reached " << path;
  EXPECT_LT(accept(abstract, nullptr, nullptr), 0) << "the candidate reached the abstract socket";
  close(by_path);
  close(abstract);
  std::filesystem::remove(path);
}

TEST(AttackTest, ACandidateCannotSignalRunOrWriteOutsideItsFolder) {
  std::filesystem::remove("/tmp/crl-escape-attack-shell");
  std::filesystem::remove("/tmp/crl-escape-attack-file");
  const Verdict v = judge("escape");
  // This process (the evaluator) is still here to look, and the verdict is whatever the program's
  // arithmetic earned: ReLU, so about 1.
  EXPECT_TRUE(v.ok()) << explain(v);
  expect_no_gain(v);
  EXPECT_FALSE(std::filesystem::exists("/tmp/crl-escape-attack-shell")) << "the candidate ran a shell command";
  EXPECT_NE(v.worker_log.find("kill(parent) -> -1"), std::string::npos) << v.worker_log;
  EXPECT_NE(v.worker_log.find("socket(AF_INET) -> -1"), std::string::npos) << v.worker_log;
  if (v.worker_log.find("Landlock ABI") != std::string::npos) {
    EXPECT_FALSE(std::filesystem::exists("/tmp/crl-escape-attack-file")) << "the candidate wrote outside its folder";
  }
  std::filesystem::remove("/tmp/crl-escape-attack-file");
}

TEST(AttackTest, ACandidateCannotResizeTheArenaTheJudgeFills) {
  const Verdict v = judge("shared_memory");
  // Not internal_error: the judge never faulted on its arena, and the program is judged as the ReLU
  // it computes.
  EXPECT_TRUE(v.ok()) << explain(v);
  expect_no_gain(v);
  EXPECT_NE(v.worker_log.find("ftruncate(0) -> -1, ftruncate(1 TiB) -> -1"), std::string::npos) << v.worker_log;
  EXPECT_EQ(v.worker_log.find("-> 0"), std::string::npos) << v.worker_log;
  // The judge keeps the task's arena for the next candidate: shrunk, it would fault at the next fill.
  const Verdict next = evaluator().evaluate(fixture_suite().find("level1/019_relu"),
                                            testing::relu_candidate("same_as_reference"), "same_as_reference");
  EXPECT_TRUE(next.ok()) << explain(next);
}

// The storage watch at a quarter of its default, so that the attacks cost CI 256 MiB of disk and
// memory, not 1 GiB.
void expect_stopped_by_the_storage_watch(const std::string& file) {
  static Evaluator watched = [] {
    EvalOptions o = quick_options(Backend::cpu);
    o.worker_storage_bytes = 256ull << 20;
    return Evaluator(o, fixture_compiler());
  }();
  const Task& task = fixture_suite().find("level1/019_relu");
  const Verdict v = watched.evaluate(task, load_program_file(fixture_dir() + "/attacks/" + file + ".cpu.crl"), file);
  EXPECT_EQ(v.status, VerdictStatus::kCrash) << explain(v);
  EXPECT_EQ(v.reward, 0);
  EXPECT_NE(v.message.find("killed by the evaluator: it held"), std::string::npos) << explain(v);
  EXPECT_NE(v.message.find("(limit 256 MiB together)"), std::string::npos) << explain(v);
  EXPECT_EQ(v.worker_log.find("written without being stopped"), std::string::npos) << v.worker_log;
  // The evaluator goes on, and a plain program of the same task is judged as usual.
  const Verdict next = watched.evaluate(task, testing::relu_candidate("same_as_reference"), "same_as_reference");
  EXPECT_TRUE(next.ok()) << explain(next);
}

TEST(AttackTest, FillingTheDiskWithFilesBelowTheSizeLimitIsStopped) { expect_stopped_by_the_storage_watch("storage_files"); }

TEST(AttackTest, FillingMemoryWithMemfdsIsStopped) { expect_stopped_by_the_storage_watch("storage_memfd"); }

TEST(AttackTest, NothingACandidateWritesReachesTheNextEvaluation) {
  const Verdict first = judge("cross_evaluation_cache");
  const Verdict second = judge("cross_evaluation_cache");
  expect_no_gain(first);
  expect_no_gain(second);
  for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
    if (first.worker_log.find("Landlock ABI") == std::string::npos) break;
    EXPECT_EQ(entry.path().filename().string().rfind("crl-cache-attack-", 0), std::string::npos) << entry.path();
  }
}

TEST(AttackTest, WritingIntoTheInputOnceTimingStartsIsCaught) {
  const Verdict v = judge("late_in_place");
  EXPECT_FALSE(v.ok()) << explain(v);
  EXPECT_TRUE(v.status_text() == "hack:input_mutation" || v.status_text() == "hack:aliasing" ||
              v.status == VerdictStatus::kMismatch)
      << explain(v);
}

TEST(AttackTest, SkippingCallsOfATimedBatchIsCaught) {
  const Verdict v = judge("skip_calls");
  EXPECT_FALSE(v.ok()) << explain(v);
}

// Input distribution: a clamp the spec's random inputs never reach, dropped. The task declares
// edge inputs, so the edge trials take the clamp; the reference itself stays ok on them.
TEST(AttackTest, DroppingAClampTheRandomInputsNeverReachFailsAnEdgeTrial) {
  static const Suite suite = Suite::load(std::string(CRL_SOURCE_DIR) + "/jobs/suite");
  const Task& task = suite.find("level2/022_matmul_scale_residual_add_clamp_log_sum_exp_mish");
  ASSERT_TRUE(task.spec.has_edges());
  EvalOptions o = quick_options(Backend::cpu);
  o.timing = false;
  Evaluator e(o, fixture_compiler());
  const Verdict dropped = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/dropped_clamp.cpu.crl"), "dropped");
  EXPECT_EQ(dropped.status, VerdictStatus::kMismatch) << explain(dropped);
  EXPECT_NE(dropped.message.find("edge trial"), std::string::npos) << explain(dropped);
  EXPECT_EQ(dropped.trials_passed, o.trials) << "the ordinary trials should pass: " << explain(dropped);
  ProgramText legit = task.program;
  legit.spec = {};
  const Verdict twin = e.evaluate(task, legit, "reference");
  EXPECT_TRUE(twin.ok()) << explain(twin);
}

// The evaluator's secret: two evaluations of one task draw different inputs unless a seed is given.
TEST(AttackTest, EveryEvaluationDrawsFreshSecretInputs) {
  Evaluator other(quick_options(Backend::cpu), fixture_compiler());
  const ProgramText program = testing::relu_candidate("same_as_reference");
  const Verdict a = evaluator().evaluate(fixture_suite().find("level1/019_relu"), program, "a");
  const Verdict b = other.evaluate(fixture_suite().find("level1/019_relu"), program, "b");
  ASSERT_FALSE(a.steps.empty());
  ASSERT_FALSE(b.steps.empty());
  EXPECT_EQ(a.steps.front().name, "judge");
  EXPECT_NE(a.steps.front().detail, b.steps.front().detail) << "two evaluators used the same secret";
}

}  // namespace
}  // namespace crl::eval
