// The tasks of `crl prompt` and `crl eval-model` and their prompts (task_prompts.h).
#include "apps/crl/task_prompts.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "rl/job.h"

namespace crl::cli {

void add_task_selection_options(CLI::App* cmd, TaskSelectionOptions& o, bool with_suite_option) {
  cmd->add_option("task", o.ids, "Task ids, e.g. level1/019_relu (default: --level's tasks, else the job's)");
  cmd->add_option("--level", o.levels, "Every task of this level of the suite (repeatable; with --job: the job's tasks of it)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--job", o.job, "Job file: its instructions, suite and tasks");
  if (with_suite_option) {
    cmd->add_option("--suite,--suite-dir", o.suite_dir, "Suite folder (default: the job's, else $CRL_SUITE_DIR, else jobs/suite)");
  }
}

TaskPrompts select_task_prompts(const TaskSelectionOptions& o, const std::string& command) {
  TaskPrompts out;  // without --job: the default instructions and suite
  if (!o.job.empty()) out.job = rl::load_job_config(o.job);
  out.suite = std::make_unique<Suite>(Suite::load(resolve_suite_dir(o.suite_dir.empty() ? out.job.suite : o.suite_dir)));
  if (!o.ids.empty()) {
    for (const std::string& id : o.ids) out.tasks.push_back(&out.suite->find(id));
  } else if (!o.levels.empty() || !o.job.empty()) {
    rl::TaskSelectionConfig selection = out.job.tasks;
    if (!o.levels.empty()) selection.levels = o.levels;
    const std::string where = o.job.empty() ? fmt::format("--level {}", fmt::join(o.levels, ",")) : o.job;
    out.tasks = rl::select_tasks(*out.suite, selection, where, "tasks");
  } else {
    throw InputError(fmt::format("{}: name a task (e.g. level1/019_relu), give --level N for a level's tasks, or --job "
                                 "JOB.yaml for the job's tasks",
                                 command));
  }
  const std::string instructions = rl::read_instructions(out.job);
  for (const Task* task : out.tasks) {
    const bool python = out.job.program_format == ProgramKind::kernelbench;
    out.prompts.push_back(rl::render_task_prompt(instructions, *task, {}, out.job.program_format,
                                                 python ? read_kernelbench_module(out.job.kernelbench, task->id) : ""));
  }
  return out;
}

}  // namespace crl::cli
