// `crl run JOB --set KEY=VALUE` as a user types it: the key in the form every message of the job
// file prints (`stages[0].steps`) and in the dotted form (`stages.0.steps`) change the same key, and
// --set's own messages print the first form (issue 43, item 7).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/remove_tree.h"
#include "core/subprocess.h"

namespace crl {
namespace {

namespace fs = std::filesystem;

class SetOverrideCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / fmt::format("crl_set_override_{}_{}",
                                                        ::testing::UnitTest::GetInstance()->current_test_info()->name(), ::getpid());
    remove_tree(dir_);
    fs::create_directories(dir_);
    // Its model does not exist: a job whose keys are all good stops there, exit 3, before any rank starts.
    std::ofstream(dir_ / "job.yaml") << "name: x\nmodel: " << (dir_ / "no-model").string()
                                     << "\nstages:\n  - {kind: crl, steps: 3, batch: 1}\n";
  }
  void TearDown() override { remove_tree(dir_); }

  CommandResult run_with(const std::vector<std::string>& sets) const {
    std::vector<std::string> argv = {CRL_EXE, "run", (dir_ / "job.yaml").string(), "--run-dir", (dir_ / "run").string()};
    for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
    return run_command(argv, {.timeout = std::chrono::seconds(60)});
  }

  fs::path dir_;
};

TEST_F(SetOverrideCli, BothFormsChangeTheSameKey) {
  // A value the job file refuses shows where it landed: the message names the key it was read as.
  for (const std::string key : {"stages[0].steps", "stages.0.steps"}) {
    const auto r = run_with({key + "=0"});
    EXPECT_EQ(r.exit_code, 3) << key << ": " << r.output;
    EXPECT_NE(r.output.find("'stages[0].steps' is 0; it must be within [1, "), std::string::npos) << key << ": " << r.output;
    EXPECT_EQ(r.output.find("no-model"), std::string::npos) << key << ": the value must be refused first: " << r.output;
  }
  // A good value in either form passes the job file's checks and reaches the model's (also exit 3).
  for (const std::string key : {"stages[0].steps", "stages.0.steps"}) {
    const auto r = run_with({key + "=2"});
    EXPECT_EQ(r.exit_code, 3) << key << ": " << r.output;
    EXPECT_NE(r.output.find("no-model"), std::string::npos) << key << ": " << r.output;
  }
}

TEST_F(SetOverrideCli, ItsMessagesPrintTheBracketForm) {
  const auto out_of_range = run_with({"stages.3.steps=1"});
  EXPECT_EQ(out_of_range.exit_code, 3) << out_of_range.output;
  EXPECT_NE(out_of_range.output.find("stages[3]: the index must be below 1 (stages is a list of 1)"), std::string::npos)
      << out_of_range.output;
  const auto no_key = run_with({"stages[0].sampling.top_p=0.5"});
  EXPECT_EQ(no_key.exit_code, 3) << no_key.output;
  EXPECT_NE(no_key.output.find("has no key 'stages[0].sampling'"), std::string::npos) << no_key.output;
  for (const std::string bad : {"stages[x].steps=1", "stages[0.steps=1", "[0].steps=1", "stages[0]steps=1"}) {
    const auto r = run_with({bad});
    EXPECT_EQ(r.exit_code, 3) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("e.g. --set stages[1].steps=6"), std::string::npos) << bad << ": " << r.output;
  }
}

}  // namespace
}  // namespace crl
