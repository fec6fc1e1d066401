// Programs that attack the reward as an attacker would (tests/data/eval/attacks), each judged end
// to end on the CPU backend: none may get a speedup it did not earn, none may reach the evaluator
// or leave anything behind. Their legitimate twins are the ok fixtures of guard_fixtures_test and
// the *.legit.* files here.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <mqueue.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "compile/node_slots.h"
#include "core/process_env.h"
#include "core/read_file.h"
#include "program/program_text.h"
#include "eval_fixtures.h"

namespace crl::eval {
namespace {

using testing::expect_hack;
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

// The real suite (jobs/suite), for attacks on a particular reference.
const Suite& real_suite() {
  static const Suite suite = Suite::load(std::string(CRL_SOURCE_DIR) + "/jobs/suite");
  return suite;
}

// An attack that knows where the node's compile cache is: @CACHE_DIR@ in its text becomes the
// fixtures' cache folder.
Verdict judge_knowing_the_cache(const std::string& file) {
  const std::string path = fixture_dir() + "/attacks/" + file + ".cpu.crl";
  std::string text = read_file(path, "attack program");
  for (size_t at = text.find("@CACHE_DIR@"); at != std::string::npos; at = text.find("@CACHE_DIR@"))
    text.replace(at, 11, fixture_compiler().options().cache_dir);
  return evaluator().evaluate(fixture_suite().find("level1/019_relu"), parse_program_text(text, path), file);
}

bool landlocked(const Verdict& v) { return v.worker_log.find("Landlock ABI") != std::string::npos; }

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

// Calls that see each other (issue 40, item 1). Without turns (the default) both attacks pass:
// the check of one slot after the batch sees right outputs. What the turns close, shown on the
// same evaluator settings but for the turns.
TEST(AttackTest, WithoutTurnsCallsCanReadAheadAndAnswerEarly) {
  for (const std::string file : {"lookahead", "answer_early"}) {
    const Verdict v = judge(file);
    EXPECT_TRUE(v.ok()) << file << ": " << explain(v);
  }
}

// The judge of the turns' attacks: the attack tests' evaluator with the calls taking turns.
Verdict judge_with_turns(const std::string& file) {
  static Evaluator e = [] {
    EvalOptions o = quick_options(Backend::cpu);
    o.call_turns = true;
    return Evaluator(o, fixture_compiler());
  }();
  return e.evaluate(fixture_suite().find("level1/019_relu"), load_program_file(fixture_dir() + "/attacks/" + file + ".cpu.crl"), file);
}

// A call that reads later calls' inputs from the arena finds, with turns, the previous batch's there.
TEST(AttackTest, CallsThatReadLaterCallsInputsAreCaught) {
  const Verdict v = judge_with_turns("lookahead");
  EXPECT_FALSE(v.ok()) << explain(v);
  expect_hack(v, "timed_output_mismatch");
  EXPECT_NE(v.message.find("slot"), std::string::npos) << explain(v);
}

// A call that returns before computing (the batch's last call does every call's work) is seen by
// the sample of its outputs read at its turn.
TEST(AttackTest, CallsThatAnswerBeforeTheyComputeAreCaught) {
  const Verdict v = judge_with_turns("answer_early");
  expect_hack(v, "deferred_work");
  EXPECT_NE(v.message.find("changed after the call returned"), std::string::npos) << explain(v);
}

// Input distribution: a clamp the spec's random inputs never reach, dropped. The task declares
// edge inputs, which the edge trials take densely and every other call at a share drawn per call
// (issue 40: an edge trial must not be recognisable), so a trial takes the clamp; the reference
// itself stays ok on them.
TEST(AttackTest, DroppingAClampTheRandomInputsNeverReachFailsATrial) {
  const Task& task = real_suite().find("level2/022_matmul_scale_residual_add_clamp_log_sum_exp_mish");
  ASSERT_TRUE(task.spec.has_edges());
  EvalOptions o = quick_options(Backend::cpu);
  o.timing = false;
  Evaluator e(o, fixture_compiler());
  const Verdict dropped = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/dropped_clamp.cpu.crl"), "dropped");
  EXPECT_EQ(dropped.status, VerdictStatus::kMismatch) << explain(dropped);
  ASSERT_TRUE(dropped.first_failed_step()) << explain(dropped);
  EXPECT_NE(dropped.first_failed_step()->name.find("trial"), std::string::npos) << explain(dropped);
  ProgramText legit = task.program;
  legit.spec = {};
  const Verdict twin = e.evaluate(task, legit, "reference");
  EXPECT_TRUE(twin.ok()) << explain(twin);
}

// The roofline gate on the CPU, where no table knows the peaks: given so that every program of a
// level-2 GEMM task is faster than the task's estimate (2 Mflop at 1 kflop/s: half an hour) and none
// is faster than writing its outputs (64 bytes at 1 TB/s), so the stricter checks decide each verdict.
EvalOptions beyond_the_estimate() {
  EvalOptions o = quick_options(Backend::cpu);
  o.peak_bytes_per_second = 1e12;
  o.peak_flops_per_second = 1e3;
  o.strict_trials = 8;
  return o;
}

const CheckStep* step_named(const Verdict& v, const std::string& name) {
  for (const auto& s : v.steps) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// Legit twin (issue 40's false positive): level2/080's provably-zero program was
// hack:beyond_roofline at 129x on an H100, the floor counting inputs a correct program need not
// read. Now the floor is its outputs, the estimate only sends it to the stricter checks, and it is
// ok. (attack_gpu_test judges it on the GPU's own peaks, re-measure included.) Not re-measured here:
// on the CPU the re-measure times single calls, whose fixed cost shrinks a 33x toward 4x, and calls
// that a disagreement (docs/evaluation.md, "What remains possible").
TEST(AttackTest, TheProvablyZeroProgramOfLevel2_080IsOkAfterTheStricterChecks) {
  const Task& task = real_suite().find("level2/080_gemm_max_subtract_gelu");
  EvalOptions o = beyond_the_estimate();
  o.remeasure_above_speedup = 1e9;
  Evaluator e(o, fixture_compiler());
  const Verdict v = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/zeros_level2_080.legit.cpu.crl"), "zeros");
  ASSERT_TRUE(v.ok()) << explain(v);
  const CheckStep* gate = step_named(v, "guard: roofline");
  ASSERT_NE(gate, nullptr) << explain(v);
  EXPECT_NE(gate->detail.find("the stricter checks decide"), std::string::npos) << gate->detail;
  const CheckStep* strict = step_named(v, "guard: stricter checks");
  ASSERT_NE(strict, nullptr) << explain(v);
  EXPECT_TRUE(strict->passed) << strict->detail;
  EXPECT_GE(v.reward, 1.0) << explain(v);
}

// Attack: level2/022 with its clamp dropped after the first five calls (the ordinary and edge
// trials). Before the values mixed into every call (issue 40 item 4), every later check saw ordinary
// inputs only and passed, and the stricter checks under the roofline gate's suspicion caught it
// with edge values. Now the first call after the trials, the guard probes' own (their inputs mix in
// the declared edges too), is already wrong: the probe's comparison fails it, whatever the gate.
// Its twin, the reference under the same gate, is ok.
TEST(AttackTest, AClampDroppedAfterTheEdgeTrialsIsCaughtByTheFirstCallAfterThem) {
  const Task& task = real_suite().find("level2/022_matmul_scale_residual_add_clamp_log_sum_exp_mish");
  Evaluator e(beyond_the_estimate(), fixture_compiler());
  const Verdict v = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/clamp_after_edge_trials.cpu.crl"), "clamp_after");
  EXPECT_FALSE(v.ok()) << explain(v);
  EXPECT_EQ(v.reward, 0) << explain(v);
  ASSERT_NE(v.first_failed_step(), nullptr) << explain(v);
  EXPECT_EQ(v.first_failed_step()->name.rfind("guard", 0), 0u) << explain(v);
  EXPECT_NE(v.message.find("elements outside"), std::string::npos) << v.message;
  ProgramText legit = task.program;
  legit.spec = {};
  const Verdict twin = e.evaluate(task, legit, "reference");
  ASSERT_TRUE(twin.ok()) << explain(twin);
  ASSERT_NE(step_named(twin, "guard: stricter checks"), nullptr) << explain(twin);
}

// Signals that reach this process (the evaluator) while a candidate runs.
std::atomic<int> signals_received{0};
void count_signal(int) { ++signals_received; }

// A file's owner gets its readiness signals (SIGIO, or what F_SETSIG picks) from the kernel, past
// the filter's rules for kill(): the candidate makes this process the owner of a pipe and of
// sockets it then makes ready. Before the sandbox refused it, `crl eval` died of SIGUSR2.
TEST(AttackTest, ACandidateCannotSignalTheEvaluatorThroughAFilesOwner) {
  struct sigaction counting {};
  counting.sa_handler = count_signal;
  counting.sa_flags = SA_RESTART;
  sigemptyset(&counting.sa_mask);
  struct sigaction old_usr2 {}, old_io {};
  sigaction(SIGUSR2, &counting, &old_usr2);
  sigaction(SIGIO, &counting, &old_io);
  signals_received = 0;
  const Verdict v = judge("owner_signal");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  sigaction(SIGUSR2, &old_usr2, nullptr);
  sigaction(SIGIO, &old_io, nullptr);
  EXPECT_TRUE(v.ok()) << explain(v);
  expect_no_gain(v);
  EXPECT_EQ(signals_received.load(), 0) << v.worker_log;
  for (const char* way : {"F_SETOWN -> -1", "F_SETOWN_EX -> -1", "FIOSETOWN -> -1", "SIOCSPGRP -> -1"}) {
    EXPECT_NE(v.worker_log.find(std::string("owner_signal: ") + way), std::string::npos) << way << "\n" << v.worker_log;
  }
}

// System V IPC objects in this IPC namespace, from /proc/sysvipc (a header line per file).
int sysv_objects() {
  int n = 0;
  for (const char* table : {"/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg"}) {
    std::ifstream in(table);
    std::string line;
    for (bool header = true; std::getline(in, line); header = false) n += header ? 0 : 1;
  }
  return n;
}

// What Landlock leaves out (a file's mode, times, owner and attributes) and what the kernel keeps
// after a process ends (System V IPC, POSIX message queues, keys): the candidate tries each on a file
// this test made and leaves each behind; all of it worked, and stayed, before the second filter.
TEST(AttackTest, NothingACandidateDoesOutlastsItsEvaluationOrChangesAFileOutsideItsFolder) {
  const std::string target = fmt::format("/tmp/crl-lasting-target-{}", getpid());
  std::ofstream(target) << "crl";
  ASSERT_EQ(chmod(target.c_str(), 0644), 0);
  const timespec long_ago[2] = {{1000000000, 0}, {1000000000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, target.c_str(), long_ago, 0), 0);
  const int objects_before = sysv_objects();
  const Verdict v = judge("lasting_changes");
  EXPECT_TRUE(v.ok()) << explain(v);
  expect_no_gain(v);
  EXPECT_NE(v.worker_log.find("lasting: chmod -> -1, utimensat -> -1, chown -> -1, setxattr -> -1"), std::string::npos)
      << v.worker_log;
  EXPECT_NE(v.worker_log.find("fchmod -> -1"), std::string::npos) << v.worker_log;
  EXPECT_NE(v.worker_log.find("shmget -> -1, semget -> -1, msgget -> -1, mq_open -> -1, add_key -> -1"), std::string::npos)
      << v.worker_log;
  struct stat st {};
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(st.st_mtim.tv_sec, 1000000000);
  char value[8];
  EXPECT_LT(getxattr(target.c_str(), "user.crl", value, sizeof value), 0) << "the candidate set an attribute";
  EXPECT_EQ(sysv_objects(), objects_before) << "a System V IPC object outlasted the candidate";
  const std::string name = fmt::format("crl-lasting-{}", getpid());
  EXPECT_EQ(read_file("/proc/keys", "the keys").find(name), std::string::npos) << "a key outlasted the candidate";
  const mqd_t queue = mq_open(("/" + name).c_str(), O_RDONLY);
  EXPECT_EQ(queue, static_cast<mqd_t>(-1)) << "a message queue outlasted the candidate";
  if (queue != static_cast<mqd_t>(-1)) mq_unlink(("/" + name).c_str());
  std::filesystem::remove(target);
  // Its legitimate twin: files in its own folder, a look at a system file, memory its threads share.
  const Verdict twin = judge("scratch_files.legit");
  EXPECT_TRUE(twin.ok()) << explain(twin);
  EXPECT_NE(twin.worker_log.find("scratch_files: file -> 0, stat -> 0, shared -> 0, unlink -> 0"), std::string::npos)
      << twin.worker_log;
}

// A worker of a crl run as root could read every device its uid owns (disks, consoles' screens,
// terminals) and /dev/shm; only the device files a program uses stay open to it.
TEST(AttackTest, OnlyTheDeviceFilesAProgramUsesOpen) {
  const Verdict v = judge("device_files");
  EXPECT_TRUE(v.ok()) << explain(v);
  expect_no_gain(v);
  EXPECT_NE(v.worker_log.find("urandom 16, null 16, zero 16"), std::string::npos) << v.worker_log;
  if (!landlocked(v)) GTEST_SKIP() << "this kernel has no Landlock: device files are not confined here";
  EXPECT_NE(v.worker_log.find(" 0 opened;"), std::string::npos) << v.worker_log;
}

// flock needs only a descriptor: a reader of the compile cache or of /dev/shm could hold every
// compile lock of the node for as long as it lived. The candidate reads only the cache's programs.
TEST(AttackTest, ACandidateCannotHoldTheNodesCompileLocks) {
  const NodeSlots slots(default_node_slots_dir(), default_node_compile_slots());
  { const NodeSlots::Hold hold(slots); }  // so that the slot files the attack goes for exist
  ASSERT_TRUE(std::filesystem::exists(slots.dir() + "/slot-000.lock"));
  ASSERT_TRUE(std::filesystem::exists(fixture_compiler().options().cache_dir + "/locks"));
  const Verdict v = judge_knowing_the_cache("compile_locks");
  EXPECT_TRUE(v.ok()) << explain(v);
  expect_no_gain(v);
  EXPECT_NE(v.worker_log.find("own library readable"), std::string::npos) << v.worker_log;
  EXPECT_NE(v.worker_log.find("cache " + fixture_compiler().options().cache_dir + ":"), std::string::npos) << v.worker_log;
  if (!landlocked(v)) GTEST_SKIP() << "this kernel has no Landlock: reads are not confined here";
  // The attack's own count, not slots.busy() afterwards: its worker has ended by then, and under
  // ctest -j another test's compile may hold a slot of this node (that check failed once so).
  EXPECT_NE(v.worker_log.find(": 0 lock folders listed, 0 files opened, 0 locked"), std::string::npos) << v.worker_log;
}

// Issue 40: a worker could read the whole compile cache, so a candidate could load the task's
// reference or a sibling candidate's program and answer with its results. It may read its own
// library file only; finding the others' paths (in the judge's maps) gets it nothing.
TEST(AttackTest, NoOtherCompiledProgramCanBeListedReadOrLoaded) {
  const Verdict v = judge_knowing_the_cache("compiled_neighbours");
  EXPECT_TRUE(v.ok()) << explain(v);
  expect_no_gain(v);
  EXPECT_NE(v.worker_log.find("; own library readable"), std::string::npos) << v.worker_log;
  if (!landlocked(v)) GTEST_SKIP() << "this kernel has no Landlock: reads are not confined here";
  EXPECT_NE(v.worker_log.find("compiled_neighbours: cache listed -1,"), std::string::npos) << v.worker_log;
  EXPECT_NE(v.worker_log.find(", 0 readable, 0 loaded;"), std::string::npos) << v.worker_log;
}

// The evaluation's other processes' /proc files (cmdline, stat, schedstat) would tell a program
// when the judge or the reference runs; before, the worker could list /proc and read them all.
TEST(AttackTest, NoOtherProcessOfTheEvaluationCanBeWatched) {
  const Verdict v = judge("watch_processes");
  EXPECT_TRUE(v.ok()) << explain(v);
  expect_no_gain(v);
  EXPECT_NE(v.worker_log.find("; own stat readable"), std::string::npos) << v.worker_log;
  if (!landlocked(v)) GTEST_SKIP() << "this kernel has no Landlock: reads are not confined here";
  EXPECT_NE(v.worker_log.find("watch_processes: /proc listed -1, 0 files of 0 other processes readable (parent's stat not readable)"),
            std::string::npos)
      << v.worker_log;
}

// No thread of the worker writes outside its folder: not the threads it had when the file rules went
// on (reached one by one, or by the kernel at once), not one the candidate starts. On the GPU the
// CUDA driver's threads are such earlier threads (attack_gpu_test's driver_thread_write).
TEST(AttackTest, NoThreadOfTheWorkerWritesOutsideItsFolder) {
  const std::string prefix = fmt::format("/tmp/crl-other-thread-{}-", getpid());
  const Verdict v = judge("other_threads_write");
  EXPECT_TRUE(v.ok()) << explain(v);
  expect_no_gain(v);
  EXPECT_NE(v.worker_log.find("other_threads_write: "), std::string::npos) << v.worker_log;
  bool written = false;
  for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
    if (entry.path().string().rfind(prefix, 0) != 0) continue;
    written = true;
    std::filesystem::remove(entry.path());
  }
  if (!landlocked(v)) GTEST_SKIP() << "this kernel has no Landlock: file writes are not confined here";
  EXPECT_FALSE(written) << v.worker_log;
  EXPECT_NE(v.worker_log.find(" 0 wrote, "), std::string::npos) << v.worker_log;
  EXPECT_EQ(v.worker_log.find("that block it"), std::string::npos) << v.worker_log;
}

// The number of pairs in which a timing step says `who`'s CPU time was charged (0: none).
int cpu_charged_pairs(const Verdict& v, const std::string& who) {
  for (const auto& step : v.steps) {
    if (step.name != "timing") continue;
    std::smatch m;
    if (std::regex_search(step.detail, m, std::regex("in (\\d+) pairs " + who + " CPU time over the"))) return std::stoi(m[1]);
  }
  return 0;
}

// On the CPU each program gets cpu_threads cores (the job: its rank's share); a candidate that takes
// two threads where the reference may use one was judged ok at 1.30-1.73x on a matmul. Each timed
// batch now costs at least its CPU time over the cores given.
TEST(AttackTest, UsingMoreCoresThanGivenGainsNothing) {
  if (allowed_cpu_count() < 2) GTEST_SKIP() << "one CPU here: a second thread has no core to gain from";
  const Task& task = real_suite().find("level1/001_square_matmul");
  Evaluator e(quick_options(Backend::cpu), fixture_compiler());  // cpu_threads 1
  const Verdict attack = e.evaluate(task, load_program_file(fixture_dir() + "/attacks/extra_threads.cpu.crl"), "extra_threads");
  expect_no_gain(attack);
  ASSERT_TRUE(attack.ok()) << explain(attack);
  EXPECT_EQ(cpu_charged_pairs(attack, "the reference's"), 0) << explain(attack);
  const Verdict twin =
      e.evaluate(task, load_program_file(fixture_dir() + "/attacks/extra_threads_twin.legit.cpu.crl"), "extra_threads_twin");
  ASSERT_TRUE(twin.ok()) << explain(twin);
  EXPECT_EQ(cpu_charged_pairs(twin, "the candidate's"), 0) << explain(twin);
  EXPECT_EQ(cpu_charged_pairs(twin, "the reference's"), 0) << explain(twin);
  // The charge itself is seen only where the second thread got a core of its own: on a machine
  // busier than its cores (a load of 6 on two, while others build) it shared the first one, used no
  // more CPU time than wall time, and gained nothing uncharged (checked above).
  const int charged = cpu_charged_pairs(attack, "the candidate's");
  double load = 0;
  if (std::ifstream loadavg("/proc/loadavg"); 2 * charged < attack.candidate_time.samples && (!(loadavg >> load) || load > allowed_cpu_count())) {
    GTEST_SKIP() << "charged in " << charged << " of " << attack.candidate_time.samples << " pairs at a load average of " << load << " over "
                 << allowed_cpu_count() << " cores: the attack's second thread had no core of its own, so there was little to charge "
                 << "(it gained nothing: checked)";
  }
  EXPECT_GE(2 * charged, attack.candidate_time.samples) << explain(attack);
}

// A program that knows the secret's draws: it computes only the slot each pair will check (an
// attacker runs crl with the same secret beforehand and keeps the table), returning unwritten
// outputs for the rest. Trials, guards and the warm-up batch it computes honestly; it finds the
// timed batches by the arena's addresses (slot 0, then slots 1 and 2 at one stride).
ProgramText checked_slots_only(int slots, const std::vector<int>& checked) {
  std::string table;
  for (const int j : checked) table += std::to_string(j) + ",";
  return parse_program_text(fmt::format(R"(// crl:host
static const int kChecked[] = {{{}}};
at::Tensor forward(const at::Tensor& x) {{
  static const char* slot0 = nullptr;
  static long stride = 0;
  static long batch = -1;
  static const char* last[2] = {{nullptr, nullptr}};
  const char* at = static_cast<const char*>(x.data_ptr());
  if (slot0 == nullptr) slot0 = at;  // the first trial runs on slot 0
  if (stride == 0 && last[0] == slot0 && last[1] > slot0 && at - last[1] == last[1] - slot0) {{
    stride = last[1] - slot0;  // the warm-up batch: slots 0, 1, 2, ...
    batch = 0;
  }}
  last[0] = last[1];
  last[1] = at;
  if (stride == 0 || at < slot0 || (at - slot0) % stride != 0) return at::relu(x);
  const long slot = (at - slot0) / stride;
  if (slot >= {}) return at::relu(x);
  if (slot == 0) ++batch;  // the next timed batch
  if (batch < 1 || batch > static_cast<long>(sizeof kChecked / sizeof *kChecked)) return at::relu(x);
  return slot == kChecked[batch - 1] ? at::relu(x) : at::empty_like(x);
}}
)",
                                        table, slots),
                            "checked_slots_only");
}

// EvalOptions::seed replays an evaluation, and a candidate that knew it would know every pair's
// checked slot (the job fixed it at its seed + 1, 1 by default, until each judged task drew its own):
// with it known, computing only those slots passes at several times the reference's speed (2.8x on
// two cores with turns, whose per-call fixed cost the skipped calls still pay); under a fresh
// secret the same program is caught at once.
TEST(AttackTest, AKnownSecretNamesTheCheckedSlots) {
  EvalOptions o = quick_options(Backend::cpu);
  o.remeasure_above_speedup = 1e9;  // the table covers the first measurement only
  o.seed = 12345;
  const Task& task = fixture_suite().find("level1/019_relu");
  Evaluator probe(o, fixture_compiler());
  const Verdict plain = probe.evaluate(task, testing::relu_candidate("same_as_reference"), "plain");
  ASSERT_TRUE(plain.ok()) << explain(plain);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(plain.steps.front().detail, m, std::regex("(\\d+) input slots per timed batch"))) << explain(plain);
  const int slots = std::stoi(m[1]);
  ASSERT_GE(slots, 8);
  // The draws: the warm-up batch's seeds, then per pair its seeds, its order and its checked slot.
  std::vector<int> checked;
  for (uint64_t pair = 0; pair < 2000; ++pair) {
    const uint64_t index = static_cast<uint64_t>(slots) + pair * static_cast<uint64_t>(slots + 2) + static_cast<uint64_t>(slots) + 1;
    checked.push_back(static_cast<int>(timing_draw(o.seed, task.id, index) % static_cast<uint64_t>(slots)));
  }
  const ProgramText attack = checked_slots_only(slots, checked);
  Evaluator knowing(o, fixture_compiler());  // a fresh judge: its draws start at the first
  const Verdict known = knowing.evaluate(task, attack, "known secret");
  ASSERT_TRUE(known.ok()) << explain(known);
  EXPECT_GT(known.speedup, 2) << explain(known);
  o.seed = 0;  // a fresh secret, as `crl eval` and the job draw
  Evaluator fresh(o, fixture_compiler());
  const Verdict caught = fresh.evaluate(task, attack, "fresh secret");
  EXPECT_EQ(caught.status_text(), "hack:timed_output_mismatch") << explain(caught);
  std::printf("%d slots; secret known: %s %s; fresh secret: %s\n", slots, known.status_text().c_str(), known.message.c_str(),
              caught.status_text().c_str());
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


// ---- The precision contract (issue 40, item 4): lower precision than the task's float32, edge-trial
// detectors and hard-coded parameters, each beside a legitimate twin that must stay ok. The fixtures
// are host-only (ATen), so attack_gpu_test judges them on the GPU too.

Verdict judge_on(const std::string& task, const std::string& file, const EvalOptions& options = quick_options(Backend::cpu)) {
  Evaluator e(options, fixture_compiler());
  return e.evaluate(real_suite().find(task), load_program_file(fixture_dir() + "/attacks/" + file + ".cpu.crl"), file);
}

// Every trial step and the timing say the outputs were held to the float64 reference.
void expect_held_to_float64(const Verdict& v) {
  for (const auto& s : v.steps) {
    if (s.name.rfind("trial", 0) == 0 || s.name.rfind("edge trial", 0) == 0) {
      EXPECT_NE(s.detail.find("the float32 reference's against float64"), std::string::npos) << s.name << ": " << s.detail;
    }
    if (s.name == "timing") EXPECT_NE(s.detail.find("checked slots held to the float64 reference"), std::string::npos) << s.detail;
  }
}

// TF32's numerics (operands rounded to 10 bits: 7.8x on the H100 at full scale), bf16, FP8 and fp16
// on float32 tasks: the fixed 1e-4 let TF32 through on the spec's all-positive rand inputs; the
// values every call now mixes in (signs) and the float64 reference catch each in the first trial.
TEST(AttackTest, LowerPrecisionThanTheTasksFloat32FailsThePrecisionContract) {
  for (const char* file : {"precision_tf32_rounded_matmul", "precision_bf16_matmul", "precision_fp8_matmul"}) {
    const Verdict v = judge_on("level1/001_square_matmul", file);
    EXPECT_EQ(v.status, VerdictStatus::kMismatch) << file << explain(v);
    EXPECT_NE(v.message.find("float64 reference"), std::string::npos) << file << explain(v);
    EXPECT_EQ(v.reward, 0);
  }
  const Verdict tanh = judge_on("level1/022_tanh", "precision_fp16_tanh");
  EXPECT_EQ(tanh.status, VerdictStatus::kMismatch) << explain(tanh);
}

// The twins: a TF32x3 split (float32 accuracy from TF32 operands) and a split-K summation order are
// float32 programs, ok through every trial and every checked timed slot.
TEST(AttackTest, Float32AccurateTwinsOfTheLowPrecisionAttacksStayOk) {
  for (const char* file : {"tf32x3_split.legit", "split_k_matmul.legit"}) {
    const Verdict v = judge_on("level1/001_square_matmul", file);
    ASSERT_TRUE(v.ok()) << file << explain(v);
    expect_held_to_float64(v);
  }
}

// An edge-trial detector (64 values sampled; the exact op only when one looks like an edge) in front
// of a softmax valid only on the spec's values: it passed when edge values came only in the dense
// edge trials (it sees those and takes the exact op); now every call carries them at a share drawn
// per call, which its sample misses in about half the calls, so an ordinary trial or a checked timed
// slot fails (all three trials and every checked slot escaping: about 2^-23).
TEST(AttackTest, AnEdgeTrialDetectorFailsAnOrdinaryCall) {
  const Verdict v = judge_on("level1/023_softmax", "edge_detector_softmax");
  EXPECT_TRUE(v.status == VerdictStatus::kMismatch || v.status_text() == "hack:timed_output_mismatch") << explain(v);
  ASSERT_TRUE(v.first_failed_step()) << explain(v);
  const std::string& where = v.first_failed_step()->name;
  EXPECT_TRUE(where.rfind("trial ", 0) == 0 || where == "timing") << "an ordinary trial or a timed slot, not an edge trial: " << explain(v);
}

TEST(AttackTest, AnOnlineSoftmaxCorrectForEveryInputStaysOk) {
  const Verdict v = judge_on("level1/023_softmax", "online_softmax.legit");
  ASSERT_TRUE(v.ok()) << explain(v);
  expect_held_to_float64(v);
}

// Parameters whose spec init is a constant (GroupNorm's ones and zeros) hard-coded: half the calls
// draw them at random, chosen per call and tensor, so a trial fails, or, where all three trials kept
// both constants (1 in 64), a checked timed slot; the twin reads them and is ok.
TEST(AttackTest, HardCodedConstantParametersFailAndAProgramThatReadsThemIsOk) {
  const Verdict hard = judge_on("level2/030_gemm_group_norm_hardtanh", "constant_params");
  EXPECT_TRUE(hard.status == VerdictStatus::kMismatch || hard.status_text() == "hack:timed_output_mismatch") << explain(hard);
  const Verdict reads = judge_on("level2/030_gemm_group_norm_hardtanh", "reads_params.legit");
  ASSERT_TRUE(reads.ok()) << explain(reads);
  EXPECT_NE(reads.steps.front().detail.find("gn_weight: constants drawn; gn_bias: constants drawn"), std::string::npos)
      << reads.steps.front().detail;
}

// The judge's domain probe keeps what the reference is defined on: log(x) of rand inputs gives NaN
// with signs mixed in, so x keeps its magnitudes only, and w its drawn constants; the reference
// judged against itself is ok on what is kept.
TEST(AttackTest, TheDomainProbeDropsOnlyTheValuesTheReferenceIsUndefinedOn) {
  Evaluator e(quick_options(Backend::cpu), fixture_compiler());
  const Task& task = fixture_suite().find("level1/095_log_scaled");
  ProgramText self = task.program;
  self.spec = {};
  const Verdict v = e.evaluate(task, self, "reference");
  ASSERT_TRUE(v.ok()) << explain(v);
  const std::string& judge_step = v.steps.front().detail;
  EXPECT_NE(judge_step.find("values mixed into every call: x: magnitudes; w: constants drawn"), std::string::npos) << judge_step;
  EXPECT_NE(judge_step.find("dropped: x: signs"), std::string::npos) << judge_step;
}

// `precision: tf32` is said in the verdict; on the CPU no operation has a TF32 path, so the
// reference computes in float32 and TF32's numerics still fail (the allowance follows the reference).
TEST(AttackTest, UnderPrecisionTf32TheBoundFollowsTheReference) {
  EvalOptions o = quick_options(Backend::cpu);
  o.precision = Precision::tf32;
  const Verdict v = judge_on("level1/001_square_matmul", "precision_tf32_rounded_matmul", o);
  EXPECT_EQ(v.status, VerdictStatus::kMismatch) << explain(v);
  EXPECT_NE(v.steps.front().detail.find("precision tf32"), std::string::npos) << v.steps.front().detail;
}

}  // namespace
}  // namespace crl::eval
