// Tests running children: exit codes, captured output, timeouts, missing programs.
#include <gtest/gtest.h>

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

TEST(Subprocess, KillsOnTimeoutIncludingGrandchildren) {
  const auto r = run_command({"sh", "-c", "sleep 30 & sleep 30"}, {.timeout = std::chrono::milliseconds(300)});
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.seconds, 5.0);
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
