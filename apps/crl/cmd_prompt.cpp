// `crl prompt [TASK...] [--level N] [--job JOB.yaml] [--suite DIR] [--json]`: the prompt the policy
// gets for each task, as a job renders it at a stage without exemplars (its instructions, the task's
// reference).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "apps/crl/commands.h"
#include "apps/crl/task_prompts.h"

namespace crl::cli {
namespace {

struct PromptOptions {
  TaskSelectionOptions selection;
  bool json = false;
};

void run_prompt(const PromptOptions& o, int& exit_code) {
  const TaskPrompts chosen = select_task_prompts(o.selection, "crl prompt");
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < chosen.tasks.size(); ++i) {
    const std::string& id = chosen.tasks[i]->id;
    const std::string& prompt = chosen.prompts[i];
    if (o.json) {
      out.push_back({{"task", id}, {"prompt", prompt}, {"chars", prompt.size()}});
    } else {
      std::cout << fmt::format("=== {} ({} characters) ===\n{}\n", id, prompt.size(), prompt);
    }
  }
  if (o.json) std::cout << out.dump(2) << "\n";
  exit_code = kExitOk;
}

}  // namespace

void add_prompt_command(CLI::App& app, int& exit_code) {
  static PromptOptions o;
  auto* cmd = app.add_subcommand("prompt",
                                 "Print the prompt the policy gets for each task (the job's instructions and the task's "
                                 "reference, no earlier programs), as a job renders it");
  add_task_selection_options(cmd, o.selection);
  cmd->add_flag("--json", o.json, "Print [{task, prompt, chars}] as JSON");
  cmd->callback([&exit_code] { run_prompt(o, exit_code); });
}

}  // namespace crl::cli
