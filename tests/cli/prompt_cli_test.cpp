// `crl prompt` as a user types it (issue 43, item 4): the prompt a job shows the policy for a task,
// its instructions and the task's reference (without kernelbench_params), as text or JSON; the
// job file's instructions and tasks when given, or a level's; bad input is exit 3 naming what.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/subprocess.h"

namespace crl {
namespace {

CommandResult crl(std::vector<std::string> args) {
  args.insert(args.begin(), CRL_FRONT_EXE);
  return run_command(args, {.timeout = std::chrono::seconds(60)});
}

nlohmann::json json_in(const CommandResult& r) {
  const auto begin = r.output.find("[\n");
  EXPECT_NE(begin, std::string::npos) << r.output;
  return nlohmann::json::parse(r.output.substr(begin == std::string::npos ? 0 : begin));
}

TEST(PromptCli, ATasksPromptHoldsTheFormatAndItsReference) {
  const auto r = crl({"prompt", "level1/019_relu", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_in(r);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["task"], "level1/019_relu");
  const std::string prompt = j[0]["prompt"].get<std::string>();
  EXPECT_EQ(j[0]["chars"].get<size_t>(), prompt.size());
  EXPECT_NE(prompt.find("## The spec section (references)"), std::string::npos);  // docs/program-format.md, the default
  EXPECT_NE(prompt.find("# Task level1/019_relu"), std::string::npos);
  EXPECT_NE(prompt.find("return at::relu(x);"), std::string::npos);
  const auto task_part = prompt.find("# Task level1/019_relu");
  ASSERT_NE(task_part, std::string::npos);
  EXPECT_EQ(prompt.find("kernelbench_params", task_part), std::string::npos);  // the reference without it
  const auto text = crl({"prompt", "level1/019_relu"});
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("=== level1/019_relu (" + std::to_string(prompt.size()) + " characters) ===\n" + prompt), std::string::npos);
}

TEST(PromptCli, AJobFileGivesItsInstructionsAndTasks) {
  const auto r = crl({"prompt", "--job", std::string(CRL_SOURCE_DIR) + "/jobs/default.yaml", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_in(r);
  ASSERT_EQ(j.size(), 2u);  // the default job's two tasks
  EXPECT_EQ(j[0]["task"], "level1/025_swish");
  EXPECT_EQ(j[1]["task"], "level1/030_softsign");
  // Its own instructions (jobs/data/ci_instructions.md, the short form), not docs/program-format.md.
  const std::string prompt = j[0]["prompt"].get<std::string>();
  EXPECT_LT(prompt.size(), 4000u) << prompt;
  EXPECT_EQ(prompt.find("## The spec section (references)"), std::string::npos) << prompt;
}

TEST(PromptCli, ALevelGivesEveryTaskOfIt) {
  // Every prompt's header counted by grep: the 50 prompts are more text than run_command keeps.
  const auto r = run_command({"bash", "-c", std::string(CRL_FRONT_EXE) + " prompt --level 3 | grep -c '^=== level3/'"},
                             {.timeout = std::chrono::seconds(60)});
  EXPECT_EQ(r.output, "50\n");  // the suite's level 3 (README: 50 level-3 models)
  // With --job: the job's tasks of that level (jobs/ci.yaml's three are of level 1).
  const auto job = crl({"prompt", "--job", std::string(CRL_SOURCE_DIR) + "/jobs/ci.yaml", "--level", "1", "--json"});
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_EQ(json_in(job).size(), 3u);
  const auto none = crl({"prompt", "--level", "9"});
  EXPECT_EQ(none.exit_code, 3) << none.output;
  EXPECT_NE(none.output.find("--level 9: 'tasks' selects no task"), std::string::npos) << none.output;
}

TEST(PromptCli, NoTaskOrAnUnknownOneIsBadInput) {
  const auto none = crl({"prompt"});
  EXPECT_EQ(none.exit_code, 3) << none.output;
  EXPECT_NE(none.output.find("name a task"), std::string::npos) << none.output;
  const auto unknown = crl({"prompt", "level9/000_nothing"});
  EXPECT_EQ(unknown.exit_code, 3) << unknown.output;
  EXPECT_NE(unknown.output.find("no task 'level9/000_nothing'"), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace crl
