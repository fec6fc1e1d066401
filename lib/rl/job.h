// The crl job (`crl run JOB.yaml`): MPI ranks split into trainers (0..T-1) and evaluators (T..),
// the stages of the job file run in order (sft, selftrain, crl: one machinery), rank 0
// coordinating (prompts and exemplars, dispatch of programs to the evaluators, reward shaping,
// the one results file, checkpoints). Data flow and tables: docs/results-format.md, jobs/README.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rl/job_config.h"
#include "rl/prompt.h"
#include "suite/kernelbench_checkout.h"
#include "suite/suite.h"

namespace crl::rl {

struct RunOptions {
  std::string run_dir;  // results.h5 and checkpoints/ go here; empty: runs/<job name>
  // Job file keys that may differ from the checkpoint's when resuming (a key covers its subkeys).
  std::vector<std::string> allow_config_change;
};

struct JobOutcome {
  bool stopped = false;  // a stop signal ended it at a step boundary, checkpointed: resumable
  std::string message;   // "stopped at crl step 7 (SIGUSR1); run the same command to resume"
  // Stopped because every program of eval.max_failed_steps steps in a row got internal_error
  // (crl's failure: the job exits with an error, but checkpointed like a stop).
  bool evaluation_failed = false;
};

// Runs the job on every rank of MPI_COMM_WORLD (MPI must be initialised, with MPI_ERRORS_RETURN).
// Collective: every rank calls it with the same job. A run folder that holds a checkpoint is
// resumed from its newest good one (docs/training.md, "Stopping and resuming"); a stop signal
// (stop_request.h) ends the job at the next step boundary with a checkpoint. Throws InputError when
// the job does not fit the world (trainer count, missing evaluators, unknown tasks) or changed
// since its checkpoint, and Error for crl's own failures.
JobOutcome run_job(const JobConfig& job, const RunOptions& options);

// The tasks of the suite a selection picks (ids, levels, categories: a task must match every list
// given), in the suite's order; InputError starting with `where` (the job file) and naming `key`
// when an id is unknown or nothing is selected.
std::vector<const Task*> select_tasks(const Suite& suite, const TaskSelectionConfig& selection, const std::string& where,
                                      const std::string& key);
// The job's tasks in the suite (its `tasks` key).
std::vector<const Task*> select_tasks(const Suite& suite, const JobConfig& job);
// The job's held-out tasks (its `validation.tasks` key; none without `validation`); InputError naming
// the file, line and key when one of them is also one of the job's `tasks` (`training`).
std::vector<const Task*> select_validation_tasks(const Suite& suite, const JobConfig& job, const std::vector<const Task*>& training);
// The prompt's instructions: the job's `instructions` file, else the doc of its program format
// (docs/program-format.md, or docs/kernelbench-format.md for program_format kernelbench).
std::string read_instructions(const JobConfig& job);
// The policy's prompt for `task` showing `exemplars` (prompt.h's build_prompt): what every stage,
// held-out validation, `crl prompt` and `crl eval-model` show the policy. With program_format
// kernelbench it shows `kernelbench_module` (the task's, read_kernelbench_module) as the reference.
std::string render_task_prompt(const std::string& instructions, const Task& task, const std::vector<PromptExemplar>& exemplars = {},
                               ProgramKind kind = ProgramKind::crl, const std::string& kernelbench_module = "");

}  // namespace crl::rl
