// What every rank of a `crl run` job knows once it has started (job.cpp builds it): the job file,
// the run folder, the suite and the job's tasks, the prompt's instructions, the number of
// evaluators, and the checkpoint the run resumes from. Read-only after start-up.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rl/job.h"
#include "rl/job_config.h"
#include "rl/prompt.h"
#include "rl/run_state.h"
#include "suite/suite.h"

namespace crl::rl {

struct JobContext {
  const JobConfig& job;
  RunOptions options;
  std::string run_dir;             // results.h5 and checkpoints/
  Suite suite;
  std::vector<const Task*> tasks;  // the job's tasks (job key `tasks`), into `suite`
  std::vector<const Task*> validation_tasks;  // held out (job key `validation.tasks`; none without it)
  std::string instructions;        // the prompt's instructions (job key `instructions`)
  // program_format kernelbench: each task's KernelBench module (job key `kernelbench`), the prompts'
  // reference, read once at the job's start.
  std::map<std::string, std::string> kernelbench_modules;
  int evaluators = 0;              // world ranks beyond the trainers
  std::optional<ResumePoint> resume;

  // The policy's prompt for `task` showing `exemplars`.
  std::string render_prompt(const Task& task, const std::vector<PromptExemplar>& exemplars) const {
    const auto module = kernelbench_modules.find(task.id);
    return render_task_prompt(instructions, task, exemplars, job.program_format,
                              module == kernelbench_modules.end() ? std::string() : module->second);
  }
  // The resume point when stage `index` is the one to continue (nullptr otherwise).
  const ResumePoint* resuming_stage(size_t index) const {
    return resume && !resume->state.stage_done && resume->state.stage == index ? &*resume : nullptr;
  }
  std::filesystem::path checkpoint_root() const { return std::filesystem::path(run_dir) / "checkpoints"; }
  std::filesystem::path results_path() const { return std::filesystem::path(run_dir) / "results.h5"; }
  // Written by rank 0 as the job ends complete (Coordinator::finish): slurm/crl.sbatch tells a step
  // that ran the job to its end from one that exited 0 without running it (an srun whose tasks
  // failed to launch exits 0 too).
  std::filesystem::path finished_mark() const { return std::filesystem::path(run_dir) / "finished.json"; }
};

}  // namespace crl::rl
