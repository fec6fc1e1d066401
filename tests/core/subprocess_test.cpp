// Tests running children: exit codes, captured output, timeouts, missing programs.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "core/subprocess.h"

namespace crl {
namespace {

TEST(Subprocess, CapturesOutputAndExitCode) {
  const auto r = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.output.find("out"), std::string::npos);
  EXPECT_NE(r.output.find("err"), std::string::npos);
}

// True while `pid` is a live process (a zombie, killed but not yet reaped, counts as dead).
bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, name, state;
  if (!(stat >> pid_field >> name >> state)) return false;
  return state != "Z" && state != "X";
}

TEST(Subprocess, KillsOnTimeoutIncludingGrandchildren) {
  const std::string pid_file = ::testing::TempDir() + "/crl_grandchild_" + std::to_string(::getpid());
  const auto r = run_command({"sh", "-c", "sleep 30 & echo $! > " + pid_file + "; wait"},
                             {.timeout = std::chrono::milliseconds(300)});
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.seconds, 5.0);
  pid_t grandchild = 0;
  ASSERT_TRUE(std::ifstream(pid_file) >> grandchild) << "the shell did not start its child";
  std::remove(pid_file.c_str());
  ASSERT_GT(grandchild, 0);
  // The kill is synchronous, but init reaps the orphan on its own time.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (process_alive(grandchild) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(process_alive(grandchild)) << "grandchild " << grandchild << " (sleep 30) survived the timeout";
  if (process_alive(grandchild)) ::kill(grandchild, SIGKILL);
}

TEST(Subprocess, PassesEnvironmentAndWorkingDir) {
  const auto r = run_command({"sh", "-c", "echo $CRL_TEST_VAR; pwd"},
                             {.working_dir = "/tmp", .env = {{"CRL_TEST_VAR", "hello"}}});
  EXPECT_TRUE(r.ok());
  EXPECT_NE(r.output.find("hello"), std::string::npos);
  EXPECT_NE(r.output.find("/tmp"), std::string::npos);
}

TEST(Subprocess, MissingProgramIsReportedNotThrown) {
  const auto r = run_command({"crl-no-such-program"});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.output.find("not found"), std::string::npos);
}

TEST(Subprocess, TruncatesOutput) {
  const auto r = run_command({"sh", "-c", "yes | head -c 100000"}, {.max_output = 1000});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.output.size(), 1000u);
}

}  // namespace
}  // namespace crl
