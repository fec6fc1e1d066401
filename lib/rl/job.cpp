// The crl job (job.h): start-up (the world against the job file, the roles, the suite, the resume
// point), /meta, then each rank's role until the job ends:
//   trainers (trainer_rank.h)    run the stages: sft (sft_stage.h), selftrain and crl (step_pipeline.h);
//                                rank 0 is also the coordinator (coordinator.h)
//   evaluators (evaluator_rank.h) judge the programs rank 0 hands out
// One step of a generating stage, as data: step_batch.h and step.h.
#include "rl/job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/process_env.h"
#include "core/read_file.h"
#include "dist/group.h"
#include "dist/mpi_roles.h"
#include "machine/gpu_names.h"
#include "policy/checkpoint.h"
#include "rl/coordinator.h"
#include "rl/evaluator_rank.h"
#include "rl/job_context.h"
#include "rl/rank_watch.h"
#include "rl/stop_request.h"
#include "rl/trainer_rank.h"

namespace crl::rl {
namespace {

namespace fs = std::filesystem;

// Planted completions (tests of the job) name one of the job's tasks and a file crl can read:
// checked at start, so that a mistyped one is bad input, not a warning in the stage's first step.
void check_planted(const JobConfig& job, const std::vector<const Task*>& tasks) {
  for (size_t i = 0; i < job.stages.size(); ++i) {
    for (size_t j = 0; j < job.stages[i].planted.size(); ++j) {
      const PlantedCompletion& p = job.stages[i].planted[j];
      const std::string key = fmt::format("stages[{}].planted[{}]", i, j);
      if (std::none_of(tasks.begin(), tasks.end(), [&](const Task* t) { return t->id == p.task; })) {
        throw InputError(fmt::format("{}: {}.task '{}' is not one of the job's {} task(s) (those its key 'tasks' selects)",
                                     job.path, key, p.task, tasks.size()));
      }
      try {
        read_input_file(p.file, key + ".file");
      } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", job.path, e.what()));
      }
    }
  }
}

// The roles need T trainers and, for stages that generate, at least one evaluator.
void check_world_size(const JobConfig& job, int world_size) {
  const bool evaluates = has_generating_stage(job);
  if (job.trainers > world_size || (evaluates && job.trainers >= world_size)) {
    throw InputError(fmt::format(
        "{}: roles.trainers is {} but the job runs {} MPI rank(s); {} Start {} ranks (mpirun -np {}: {} trainers plus "
        "at least one evaluator) or lower roles.trainers.",
        job.path, job.trainers, world_size,
        evaluates ? "stages selftrain and crl need at least one evaluator rank beside the trainers." : "",
        job.trainers + (evaluates ? 1 : 0), job.trainers + (evaluates ? 1 : 0), job.trainers));
  }
}

// A checkpoint found by rank 0 (null: none), as every rank learns it.
struct FoundCheckpoint {
  std::string dir;
  nlohmann::json user_state;
};

class Job {
 public:
  Job(const JobConfig& job, const RunOptions& options) : job_(job), options_(options) {}
  JobOutcome run();

 private:
  bool is_coordinator() const { return roles_.world_rank == 0; }
  void start();
  void find_resume_point();
  // Every rank's identity to rank 0 (/meta) and to every trainer (their watch over the node's ranks).
  void share_identities();
  JobStop stop_before_first_step();
  JobStop run_role();

  const JobConfig& job_;
  RunOptions options_;
  dist::MpiRoles roles_;
  std::unique_ptr<JobContext> context_;
  std::unique_ptr<RankWatch> watch_;            // trainers
  std::unique_ptr<Coordinator> coordinator_;    // rank 0
  std::unique_ptr<TrainerRank> trainer_;        // trainers
};

void Job::start() {
  const dist::Group world = dist::Group::world();
  check_world_size(job_, world.size());
  roles_ = dist::split_roles(world.comm(), job_.trainers);
  context_ = std::unique_ptr<JobContext>(new JobContext{job_, options_, options_.run_dir.empty() ? "runs/" + job_.name : options_.run_dir,
                                                        Suite::load(resolve_suite_dir(job_.suite)), {}, {}, {}, {},
                                                        world.size() - job_.trainers, std::nullopt});
  context_->tasks = select_tasks(context_->suite, job_);
  context_->validation_tasks = select_validation_tasks(context_->suite, job_, context_->tasks);
  check_planted(job_, context_->tasks);
  context_->instructions = read_instructions(job_);
  if (job_.program_format == ProgramKind::kernelbench) {
    // Every prompt shows its task's module, read once here: one missing is bad input now, not a
    // failed step later.
    for (const auto* list : {&context_->tasks, &context_->validation_tasks}) {
      for (const Task* task : *list) {
        try {
          context_->kernelbench_modules[task->id] = read_kernelbench_module(job_.kernelbench, task->id);
        } catch (const IoError& e) {
          throw InputError(fmt::format("{}: key 'kernelbench': {}", job_.path, e.what()));
        }
      }
    }
  }
  find_resume_point();
}

// Rank 0 finds the newest good checkpoint and checks the job file against the one it was written
// with; every rank learns the outcome (a refusal on rank 0 ends the job there).
void Job::find_resume_point() {
  nlohmann::json found;  // null: none
  if (is_coordinator()) {
    if (const std::optional<fs::path> dir = policy::find_latest_checkpoint(context_->checkpoint_root())) {
      const policy::CheckpointState state = policy::read_checkpoint_state(*dir);
      if (!state.user_state.contains("job_config")) {
        throw InputError(fmt::format("{}: not a checkpoint of crl run (no job_config in trainer_state.json)", dir->string()));
      }
      require_unchanged_job(state.user_state.at("job_config"), job_.as_json, options_.allow_config_change,
                            fmt::format("{} (resuming from {})", job_.path, dir->string()));
      found = {{"dir", dir->string()}, {"user_state", state.user_state}};
    }
  }
  found = dist::Group::world().broadcast(found, 0, "the resume point");
  if (found.is_null()) return;
  ResumePoint& resume = context_->resume.emplace(ResumePoint::from_user_state(found.at("dir").get<std::string>(), found.at("user_state")));
  if (resume.state.stage >= job_.stages.size()) {
    throw InputError(fmt::format("{}: the checkpoint is of stage {}, but {} has {} stage(s)", resume.dir, resume.state.stage + 1,
                                 job_.path, job_.stages.size()));
  }
  if (is_coordinator()) {
    const size_t next = resume.state.stage + (resume.state.stage_done ? 1 : 0);
    spdlog::info("resuming from {} ({} step {})", resume.dir,
                 next < job_.stages.size() ? stage_kind_name(job_.stages[next].kind) : std::string("end of job"),
                 resume.state.job_step);
  }
}

void Job::share_identities() {
  const dist::Group world = dist::Group::world();
  const RankInfo me{roles_.world_rank, roles_.is_trainer() ? "trainer" : "evaluator", hostname(),
                    device_name(job_.backend, roles_.local_rank), static_cast<int64_t>(getpid())};
  const std::vector<RankInfo> all = world.gather(me, 0, "a rank's identity");
  const std::vector<RankInfo> everyone = world.broadcast(all, 0, "the ranks' identities");
  if (roles_.is_trainer()) {
    std::vector<RankIdentity> identities;
    for (const RankInfo& r : everyone) identities.push_back({r.rank, r.role, r.host, static_cast<pid_t>(r.pid)});
    watch_ = std::make_unique<RankWatch>(identities, roles_.world_rank, hostname(), [](const std::string& what) {
      const std::string message = what + "; ending the job (its peers would wait for it forever)";
      spdlog::error("{}", message);
      dist::abort_job(message, 4);
    });
  }
  if (!is_coordinator()) return;
  coordinator_ = std::make_unique<Coordinator>(*context_);
  coordinator_->write_meta(all);
}

// A stop that came while the job started (LibTorch's start-up, MPI_Init, the models' load: the
// handlers are in place from the process's start): every rank learns it here, and the job ends
// before its first step with nothing to checkpoint (a resumed run's checkpoint stands).
JobStop Job::stop_before_first_step() {
  const dist::Group world = dist::Group::world();
  const std::vector<int> signals = world.gather(stop_signal(), 0, "a rank's stop signal");
  std::string message;
  const auto first = std::find_if(signals.begin(), signals.end(), [](int s) { return s != 0; });
  if (first != signals.end()) {
    message = fmt::format("stopped before the first step ({}; rank {} received it): nothing to checkpoint; run the same command to {}",
                          signal_name(*first), first - signals.begin(), context_->resume ? "resume" : "start it");
  }
  message = world.broadcast(message, 0, "the stop before the first step");
  if (!message.empty() && watch_) watch_->disarm();  // the ranks leave once all have learnt it
  return {message, false};
}

JobStop Job::run_role() {
  if (roles_.is_trainer()) {
    trainer_->run();
    return trainer_->stopped();
  }
  const StopNotice notice = EvaluatorRank(*context_, roles_).run();
  return {notice.stopped, notice.evaluation_failed};
}

JobOutcome Job::run() {
  if (const int failed = install_stop_signal_handlers(); failed != 0) {
    throw Error(fmt::format("cannot install the handler of {}", signal_name(failed)));
  }
  start();
  if (job_.share_gpu && job_.backend == "cuda") {
    spdlog::warn("share_gpu: trainers and evaluators share GPUs, so timings (and speedups) are noisier");
  }
  // Every rank takes part in the /meta gathers before the roles go their ways.
  share_identities();
  if (roles_.is_trainer()) trainer_ = std::make_unique<TrainerRank>(*context_, roles_, coordinator_.get(), *watch_);
  JobStop stop = stop_before_first_step();
  if (stop.message.empty()) stop = run_role();
  // Stopped: no rank leaves (exit code 5) before all have done their part.
  if (!stop.message.empty()) dist::Group::world().barrier();
  roles_.release();
  if (stop.message.empty()) return {};
  if (stop.evaluation_failed) {
    spdlog::error("{}", stop.message);
  } else {
    spdlog::warn("{}", stop.message);
  }
  return {true, stop.message, stop.evaluation_failed};
}

}  // namespace

std::vector<const Task*> select_tasks(const Suite& suite, const TaskSelectionConfig& selection, const std::string& where,
                                      const std::string& key) {
  for (const std::string& id : selection.ids) {
    try {
      suite.find(id);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: '{}.ids': {}", where, key, e.what()));
    }
  }
  std::vector<const Task*> out;
  for (const Task& t : suite.tasks()) {
    const auto in = [](const auto& list, const auto& v) { return list.empty() || std::find(list.begin(), list.end(), v) != list.end(); };
    if (in(selection.ids, t.id) && in(selection.levels, t.level) && in(selection.categories, t.spec.category)) out.push_back(&t);
  }
  if (out.empty()) throw InputError(fmt::format("{}: '{}' selects no task of the suite in {}", where, key, suite.dir()));
  return out;
}

std::vector<const Task*> select_tasks(const Suite& suite, const JobConfig& job) { return select_tasks(suite, job.tasks, job.path, "tasks"); }

std::vector<const Task*> select_validation_tasks(const Suite& suite, const JobConfig& job, const std::vector<const Task*>& training) {
  if (!job.validation.enabled) return {};
  std::vector<const Task*> held_out = select_tasks(suite, job.validation.tasks, job.validation.where, "validation.tasks");
  for (const Task* t : held_out) {
    if (std::find(training.begin(), training.end(), t) != training.end()) {
      throw InputError(fmt::format("{}: 'validation.tasks' selects {}, which the job's 'tasks' trains on too: a held-out task must "
                                   "not be a training task; remove it from one of the two",
                                   job.validation.where, t->id));
    }
  }
  return held_out;
}

std::string read_instructions(const JobConfig& job) {
  const char* doc = job.program_format == ProgramKind::kernelbench ? "/docs/kernelbench-format.md" : "/docs/program-format.md";
  return read_input_file(job.instructions.empty() ? std::string(CRL_SOURCE_DIR) + doc : job.instructions, "prompt instructions");
}

std::string render_task_prompt(const std::string& instructions, const Task& task, const std::vector<PromptExemplar>& exemplars,
                               ProgramKind kind, const std::string& kernelbench_module) {
  if (kind == ProgramKind::kernelbench) return build_prompt({instructions, task.id, kernelbench_module, exemplars, true, kind});
  return build_prompt({instructions, task.id, task.text, exemplars, true});
}

JobOutcome run_job(const JobConfig& job, const RunOptions& options) { return Job(job, options).run(); }

}  // namespace crl::rl
