// `crl prompt [TASK...] [--job JOB.yaml] [--suite DIR] [--json]`: the prompt the policy gets for each
// task, as a job renders it at a stage without exemplars (its instructions, the task's reference).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "apps/crl/commands.h"
#include "core/error.h"
#include "rl/job.h"
#include "rl/job_config.h"
#include "rl/prompt.h"
#include "suite/suite.h"

namespace crl::cli {
namespace {

struct PromptOptions {
  std::vector<std::string> ids;
  std::string job;
  std::string suite_dir;
  bool json = false;
};

void run_prompt(const PromptOptions& o, int& exit_code) {
  rl::JobConfig job;  // without --job: the default instructions and suite
  if (!o.job.empty()) job = rl::load_job_config(o.job);
  const Suite suite = Suite::load(resolve_suite_dir(o.suite_dir.empty() ? job.suite : o.suite_dir));
  std::vector<const Task*> tasks;
  if (!o.ids.empty()) {
    for (const std::string& id : o.ids) tasks.push_back(&suite.find(id));
  } else if (!o.job.empty()) {
    tasks = rl::select_tasks(suite, job);
  } else {
    throw InputError("crl prompt: name a task (e.g. level1/019_relu) or give --job JOB.yaml for the job's tasks");
  }
  const std::string instructions = rl::read_instructions(job);
  nlohmann::json out = nlohmann::json::array();
  for (const Task* task : tasks) {
    const std::string prompt = rl::build_prompt({instructions, task->id, task->text, {}, true});
    if (o.json) {
      out.push_back({{"task", task->id}, {"prompt", prompt}, {"chars", prompt.size()}});
    } else {
      std::cout << fmt::format("=== {} ({} characters) ===\n{}\n", task->id, prompt.size(), prompt);
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
  cmd->add_option("task", o.ids, "Task ids (default with --job: the job's tasks)");
  cmd->add_option("--job", o.job, "Job file: its instructions, suite and tasks");
  cmd->add_option("--suite,--suite-dir", o.suite_dir, "Suite folder (default: the job's, else $CRL_SUITE_DIR, else jobs/suite)");
  cmd->add_flag("--json", o.json, "Print [{task, prompt, chars}] as JSON");
  cmd->callback([&exit_code] { run_prompt(o, exit_code); });
}

}  // namespace crl::cli
