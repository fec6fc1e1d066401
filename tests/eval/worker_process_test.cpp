// The worker sandbox: requests and replies, and a crash, hang, exit, log flood or garbage reply
// ends only that worker and says how; the environment is clean and no extra fds leak in.
#include <gtest/gtest.h>
#include <signal.h>

#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <thread>

#include "eval/scratch_dir.h"
#include "eval/worker_process.h"

namespace crl::eval {
namespace {

class WorkerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = std::make_unique<ScratchDir>("crl_worker_process_test_"); }
  WorkerOptions options() {
    WorkerOptions o;
    o.executable = FAKE_WORKER;
    o.log_path = dir_->file("worker.log");
    o.environment = clean_worker_environment(dir_->path(), "-1");
    return o;
  }
  static nlohmann::json op(const std::string& name) { return {{"op", name}}; }
  std::unique_ptr<ScratchDir> dir_;
};

TEST_F(WorkerProcessTest, EchoesTheRequest) {
  WorkerProcess worker(options());
  nlohmann::json m = op("echo");
  m["seed"] = 42;
  const nlohmann::json reply = worker.request(m, std::chrono::seconds(30));
  EXPECT_EQ(reply["echo"]["op"], "echo");
  EXPECT_EQ(reply["echo"]["seed"], 42);
  // The same worker serves a second request.
  EXPECT_EQ(worker.request(op("echo"), std::chrono::seconds(30))["ok"], true);
  worker.stop();
  EXPECT_TRUE(worker.exit().exited);
  EXPECT_EQ(worker.exit().exit_code, 0);
}

// The timing's CPU charge holds a worker's CPU time to the time it was thawed: one thread that
// computes on after its reply, until the evaluator freezes it, used more CPU time than the round
// trip took but never more than its thawed time; a frozen worker's thawed time stands still.
TEST_F(WorkerProcessTest, OneThreadNeverUsesMoreCpuTimeThanItWasThawed) {
  WorkerProcess worker(options());
  ASSERT_EQ(worker.request(op("echo"), std::chrono::seconds(30))["ok"], true);  // started: its start-up is not measured
  worker.freeze();
  const double cpu_before = worker.cpu_seconds(), thawed_before = worker.thawed_seconds();
  ASSERT_GE(cpu_before, 0);
  nlohmann::json m = op("spin_after_reply");
  m["ms"] = 500;
  const auto sent = std::chrono::steady_clock::now();
  EXPECT_EQ(worker.request(m, std::chrono::seconds(30))["ok"], true);
  const double round_trip = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the evaluator late to freeze it
  worker.freeze();
  const double cpu = worker.cpu_seconds() - cpu_before, thawed = worker.thawed_seconds() - thawed_before;
  EXPECT_GT(cpu, round_trip + 0.03) << "the spin after the reply ran while the worker was thawed";
  EXPECT_LE(cpu, thawed);
  EXPECT_GE(thawed, round_trip + 0.3);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(worker.thawed_seconds() - thawed_before, thawed) << "frozen, its thawed time stands still";
  worker.stop();
}

TEST_F(WorkerProcessTest, SegfaultIsReportedAsASignalAndTheLogIsKept) {
  WorkerProcess worker(options());
  EXPECT_THROW(worker.request(op("segfault"), std::chrono::seconds(30)), worker::ChannelClosed);
  EXPECT_FALSE(worker.running());
  EXPECT_EQ(worker.exit().signal, SIGSEGV);
  EXPECT_FALSE(worker.exit().killed_by_us);
  EXPECT_NE(worker.exit().describe().find("signal 11"), std::string::npos) << worker.exit().describe();
  EXPECT_NE(worker.log(1000).find("about to crash"), std::string::npos);
}

TEST_F(WorkerProcessTest, HangIsKilledWithItsWholeGroupAtTheDeadline) {
  WorkerProcess worker(options());
  const pid_t group = worker.pid();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(worker.request(op("hang"), std::chrono::milliseconds(300)), worker::ChannelTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(worker.running());
  EXPECT_TRUE(worker.exit().killed_by_us);
  EXPECT_EQ(worker.exit().signal, SIGKILL);
  // The hanging grandchild went with the group (it may linger a moment as a zombie of init).
  bool group_gone = false;
  for (int i = 0; i < 200 && !group_gone; ++i) {
    group_gone = kill(-group, 0) != 0;
    if (!group_gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(group_gone);
}

TEST_F(WorkerProcessTest, ExitIsReportedWithItsCode) {
  WorkerProcess worker(options());
  EXPECT_THROW(worker.request(op("exit"), std::chrono::seconds(30)), worker::ChannelClosed);
  EXPECT_TRUE(worker.exit().exited);
  EXPECT_EQ(worker.exit().exit_code, 7);
  // A request to a dead worker fails at once.
  EXPECT_THROW(worker.request(op("echo"), std::chrono::seconds(30)), worker::ChannelClosed);
}

TEST_F(WorkerProcessTest, LogFloodIsStoppedByTheFileSizeLimit) {
  WorkerOptions o = options();
  o.log_size_limit = 1 << 20;
  WorkerProcess worker(o);
  EXPECT_THROW(worker.request(op("flood"), std::chrono::seconds(30)), worker::ChannelClosed);
  EXPECT_EQ(worker.exit().signal, SIGXFSZ);
  struct stat st {};
  ASSERT_EQ(stat(dir_->file("worker.log").c_str(), &st), 0);
  EXPECT_LE(st.st_size, 1 << 20);
  EXPECT_LE(worker.log(4096).size(), 4096u + 64u);
}

TEST_F(WorkerProcessTest, GarbageReplyIsAnInputErrorAndTheWorkerIsKilled) {
  WorkerProcess worker(options());
  EXPECT_THROW(worker.request(op("garbage"), std::chrono::seconds(30)), InputError);
  EXPECT_FALSE(worker.running());
}

TEST_F(WorkerProcessTest, EnvironmentIsCleanFdsClosedAndLimitsSet) {
  setenv("CRL_TEST_SECRET", "do-not-leak", 1);
  WorkerOptions o = options();
  o.address_space_limit = uint64_t{48} << 30;
  WorkerProcess worker(o);
  const nlohmann::json reply = worker.request(op("inspect"), std::chrono::seconds(30));
  unsetenv("CRL_TEST_SECRET");
  const auto& env = reply["env"];
  EXPECT_FALSE(env.contains("CRL_TEST_SECRET"));
  EXPECT_EQ(env["HOME"], dir_->path());
  EXPECT_EQ(env["LANG"], "C");
  EXPECT_EQ(reply["open_fds"].get<int>(), 5) << "stdin, stdout, stderr and the two channel ends";
  EXPECT_EQ(reply["rlimit_as"].get<uint64_t>(), uint64_t{48} << 30);
  EXPECT_TRUE(reply["pgid_is_pid"].get<bool>());
}

TEST_F(WorkerProcessTest, MissingExecutableEndsAtTheFirstRequest) {
  WorkerOptions o = options();
  o.executable = dir_->file("no-such-worker");
  WorkerProcess worker(o);
  EXPECT_THROW(worker.request(op("echo"), std::chrono::seconds(30)), worker::ChannelClosed);
  EXPECT_EQ(worker.exit().exit_code, 127);
}

}  // namespace
}  // namespace crl::eval
