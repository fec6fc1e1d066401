// Runs the built crl-worker as something other than the evaluator would: with a preloaded or
// audited library in its environment it refuses to run (a library that interposes on its calls
// could fake what it measures); without the evaluator's channel it says how it is started.
#include <gtest/gtest.h>

#include <string>

#include "core/subprocess.h"

namespace crl {
namespace {

const std::vector<std::string> kJudge = {CRL_WORKER_EXE, "--channel", "3,4", "--role", "judge"};

TEST(WorkerCli, RefusesToRunWithAPreloadedLibrary) {
  // libm interposes on nothing: the loader preloads it and the worker itself must refuse.
  const CommandResult r = run_command(kJudge, {.timeout = std::chrono::seconds(30), .env = {{"LD_PRELOAD", "libm.so.6"}}});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("refusing to run with LD_PRELOAD=libm.so.6"), std::string::npos) << r.output;
}

TEST(WorkerCli, RefusesToRunWithAnAuditLibrary) {
  const CommandResult r = run_command(kJudge, {.timeout = std::chrono::seconds(30), .env = {{"LD_AUDIT", "libm.so.6"}}});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("refusing to run with LD_AUDIT=libm.so.6"), std::string::npos) << r.output;
}

TEST(WorkerCli, WithoutTheEvaluatorsChannelItSaysHowItIsStarted) {
  const CommandResult r = run_command({CRL_WORKER_EXE, "--role", "judge"}, {.timeout = std::chrono::seconds(30)});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("started only by it"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace crl
