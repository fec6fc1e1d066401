// The tasks a command works on and the prompt the policy gets for each, chosen as `crl prompt` and
// `crl eval-model` both take them: task ids, --level N, or --job JOB.yaml (its tasks, instructions,
// suite and prompt format); the prompt as a job renders it at a stage without exemplars.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "rl/job_config.h"
#include "suite/suite.h"

namespace crl::cli {

struct TaskSelectionOptions {
  std::vector<std::string> ids;  // positional task ids
  std::vector<int> levels;       // --level (repeatable)
  std::string job;               // --job JOB.yaml
  std::string suite_dir;         // --suite
};

// Adds the positional task ids, --level, --job and (unless the command has its own) --suite.
void add_task_selection_options(CLI::App* cmd, TaskSelectionOptions& o, bool with_suite_option = true);

struct TaskPrompts {
  rl::JobConfig job;                   // --job's, or the defaults (the default instructions and suite)
  std::unique_ptr<Suite> suite;
  std::vector<const Task*> tasks;      // into *suite: the ids in the order given, else the suite's order
  std::vector<std::string> prompts;    // one per task
};

// The chosen tasks and their prompts. InputError naming `command` when nothing selects a task, and
// naming the job file or the suite when an id or a level is unknown or selects nothing.
TaskPrompts select_task_prompts(const TaskSelectionOptions& o, const std::string& command);

}  // namespace crl::cli
