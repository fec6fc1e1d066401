// The crl job: roles, stages, steps, dispatch, rewards, updates and the results file (job.h).
//
// One step of a generating stage (selftrain, crl), strictly on-policy (max_staleness 0):
//   rank 0          draws the step's tasks, samples K exemplars per task, builds the prompts,
//                   broadcasts them to the trainers
//   every trainer   generates G completions for its share of the prompts (groups r, r+T, ...)
//                   and sends their texts to rank 0
//   rank 0          parses them (format_error without a program), hands the programs to the
//                   evaluators (dispatch.h) and collects the verdicts; shapes the rewards
//                   (reward_shaping.h), broadcasts advantages and which rollouts train
//   every trainer   one optimiser step (or updates_per_batch) on its rollouts: GRPO (crl) or
//                   SFT on the kept ones (selftrain); gradients all-reduced
//   rank 0          writes the step's /steps row, /rollouts rows and texts, flushes; adds the
//                   correct programs to the exemplar database
// The sft stage has no generation: each step trains on a batch of the data file's examples.
#include "rl/job.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <numeric>
#include <optional>
#include <random>

#include <unistd.h>

#include "compile/compiler.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/read_file.h"
#include "core/seeds.h"
#include "core/hash.h"
#include "dist/mpi_check.h"
#include "core/process_env.h"
#include "core/statistics.h"
#include "dist/communicator.h"
#include "dist/group.h"
#include "dist/mpi_roles.h"
#include "eval/evaluator.h"
#include "core/provenance.h"
#include "machine/gpu_names.h"
#include "policy/checkpoint.h"
#include "policy/config.h"
#include "policy/engine.h"
#include "policy/generate.h"
#include "policy/lora.h"
#include "policy/model.h"
#include "policy/tokenizer.h"
#include "program/program_text.h"
#include "results/results_reader.h"
#include "results/results_writer.h"
#include "rl/chat_template.h"
#include "rl/completion.h"
#include "rl/dispatch.h"
#include "rl/exemplar_db.h"
#include "rl/failing_evaluation.h"
#include "rl/job_tables.h"
#include "rl/losses.h"
#include "rl/prompt.h"
#include "rl/rank_watch.h"
#include "rl/reward_shaping.h"
#include "rl/sft_data.h"
#include "rl/stop_request.h"
#include "rl/train_step.h"
#include "rl/verdict_reuse.h"
#include "suite/suite.h"

#if CRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace crl::rl {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// ---- what every rank knows ---------------------------------------------------------------------

std::vector<const Task*> select_tasks(const Suite& suite, const JobConfig& job) {
  for (const std::string& id : job.tasks.ids) suite.find(id);  // unknown ids: InputError naming the suite
  std::vector<const Task*> out;
  for (const Task& t : suite.tasks()) {
    const auto in = [](const auto& list, const auto& v) { return list.empty() || std::find(list.begin(), list.end(), v) != list.end(); };
    if (in(job.tasks.ids, t.id) && in(job.tasks.levels, t.level) && in(job.tasks.categories, t.spec.category)) out.push_back(&t);
  }
  if (out.empty()) throw InputError(fmt::format("{}: 'tasks' selects no task of the suite in {}", job.path, suite.dir()));
  return out;
}

// The step's tasks: `batch` of them, without repetition while the list allows, from the job's
// seed and the step (so a resumed run draws the same).
std::vector<const Task*> draw_tasks(const std::vector<const Task*>& tasks, int64_t batch, uint64_t seed, int64_t step) {
  std::mt19937_64 rng(seeds::task_draw_seed(seed, step));
  std::vector<const Task*> out;
  while (static_cast<int64_t>(out.size()) < batch) {
    std::vector<const Task*> round = tasks;
    std::shuffle(round.begin(), round.end(), rng);
    for (const Task* t : round) {
      if (static_cast<int64_t>(out.size()) < batch) out.push_back(t);
    }
  }
  return out;
}

struct Status {
  std::string text;  // status_text
  eval::VerdictStatus status;
};

// ---- the job's state ---------------------------------------------------------------------------

struct Rollout {
  int64_t group = 0, sample = 0;
  std::vector<int64_t> completion_ids;
  std::string text;
  std::vector<float> logprobs;  // the generating policy's, per completion token (empty: planted)
};

// Where a resumed run starts: the checkpoint and what the job put in its user state.
struct ResumePoint {
  std::string dir;
  size_t stage = 0;            // the stage the checkpoint was written in
  int64_t stage_steps = 0;     // its steps done (sft: batches; selftrain: rounds; crl: steps)
  bool stage_done = false;     // written at the stage's end: resume with the next stage
  int64_t job_step = 0;        // the job's step counter: steps done
  int64_t policy_version = 0;
  nlohmann::json normalizer;   // the crl stage's reward window (null elsewhere)
  nlohmann::json in_flight;    // staleness 1: the generated, unjudged next step (null: none)
  std::string stage_start;     // the checkpoint its stage started from ("" for the first stage)
  int64_t steps_rows = 0, rollouts_rows = 0;  // rows of /steps and /rollouts it covers

  static ResumePoint from_json(const std::string& dir, const nlohmann::json& user_state) {
    const std::string origin = (fs::path(dir) / "trainer_state.json").string();
    try {
      ResumePoint r;
      r.dir = dir;
      r.stage = user_state.at("stage").get<size_t>();
      r.stage_steps = user_state.at("stage_steps").get<int64_t>();
      r.stage_done = user_state.at("stage_done").get<bool>();
      r.job_step = user_state.at("job_step").get<int64_t>();
      r.policy_version = user_state.at("policy_version").get<int64_t>();
      r.normalizer = user_state.at("normalizer");
      r.in_flight = user_state.value("in_flight", nlohmann::json());
      r.stage_start = user_state.value("stage_start", std::string());
      r.steps_rows = user_state.at("rows").at("steps").get<int64_t>();
      r.rollouts_rows = user_state.at("rows").at("rollouts").get<int64_t>();
      if (r.stage_steps < 0 || r.job_step < 0 || r.steps_rows < 0 || r.rollouts_rows < 0) throw InputError("negative counts");
      return r;
    } catch (const nlohmann::json::exception& e) {
      throw InputError(fmt::format("{}: user_state is not a crl run's: {}", origin, e.what()));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: user_state is not a crl run's: {}", origin, e.what()));
    }
  }
};

class Job {
 public:
  Job(const JobConfig& job, const RunOptions& options) : job_(job), options_(options) {}
  JobOutcome run();

 private:
  bool is_coordinator() const { return roles_.world_rank == 0; }
  void start();
  void run_evaluator();
  void run_trainer();
  void write_meta();

  void run_sft_stage(size_t index, const StageConfig& stage);
  void run_generating_stage(size_t index, const StageConfig& stage);
  // One trainer's rollouts of a step as generated, before evaluation.
  struct GeneratedStep {
    int64_t job_step = 0, local_step = 0;
    int64_t policy_version = 0;  // optimiser steps of the policy that generated them
    nlohmann::json plan;         // every group's task, prompt and exemplar ids (all trainers alike)
    std::vector<std::vector<int64_t>> group_prompts;  // prompt ids of this trainer's groups
    std::vector<Rollout> mine;   // this trainer's groups' rollouts
    double seconds = 0;          // generation wall time on this trainer
    Clock::time_point finished = Clock::now();
  };
  // Rank 0 draws the step's tasks and exemplars and renders the prompts; collective over the trainers.
  nlohmann::json make_plan(const StageConfig& stage, int64_t job_step);
  std::vector<std::vector<int64_t>> my_group_prompts(const nlohmann::json& plan, int64_t groups) const;
  // This trainer's groups of the plan through the generation engine, planted completions in (no
  // MPI: rank 0 runs it beside its dispatch when steps overlap).
  GeneratedStep generate_step(const StageConfig& stage, nlohmann::json plan, int64_t job_step, int64_t local_step);
  nlohmann::json in_flight_part(const GeneratedStep& g) const;
  GeneratedStep in_flight_from_checkpoint(const ResumePoint& resume, const StageConfig& stage) const;
  std::unique_ptr<Trainer> make_trainer(const StageConfig& stage, int64_t optimiser_steps);
  // The weights stage `index` started from (the KL reference): the job's model for the first
  // stage, else the checkpoint the stage before it ended with (never pruned), resumed or not.
  policy::CausalLm stage_start_model(size_t index);
  void finish_stage(size_t index, const StageConfig& stage, Trainer& trainer);
  // Collective over the trainers: rank 0 writes the checkpoint (every trainer's generator states
  // gathered into it), the others wait until its DONE marker is written.
  // `in_flight`: a step generated but not yet judged (staleness 1), kept in the checkpoint.
  void save_checkpoint(const StageConfig& stage, Trainer& trainer, size_t stage_index, int64_t stage_steps, bool stage_done,
                       const RewardNormalizer* normalizer, const GeneratedStep* in_flight = nullptr);
  // At a step boundary: whether any rank (a trainer, or an evaluator's note to rank 0) received a
  // stop signal; collective over the trainers, so all of them agree. Sets stop_message_.
  bool stop_agreed(const std::string& stage_name);
  // The resume point when stage `index` is the one to continue (nullptr otherwise).
  const ResumePoint* resuming_stage(size_t index) const {
    return resume_ && !resume_->stage_done && resume_->stage == index ? &*resume_ : nullptr;
  }
  void find_resume_point();
  void open_results_file();

  std::vector<int64_t> prompt_ids(const std::string& prompt) const;
  std::vector<int64_t> completion_ids(const std::string& completion) const;
  std::string render_prompt(const Task& task, const std::vector<PromptExemplar>& exemplars) const;
  // Micro-batches of (prompt, completion) sequences, right padded, loss on the completion where `train`.
  struct Sequence {
    const std::vector<int64_t>* prompt;
    const std::vector<int64_t>* completion;
    bool train;
    double advantage;
    const std::vector<float>* generating_logp = nullptr;  // per completion token (null: none)
  };
  // `generating_logp` (optional): per micro-batch [B, S] fp32, the generating policy's log-prob of
  // each completion token at its column (as next_token_log_probs places them), and `has_generating_logp`
  // [B] bool, which rows have them.
  std::vector<MicroBatch> micro_batches(const std::vector<Sequence>& sequences, std::vector<torch::Tensor>* advantages,
                                        std::vector<torch::Tensor>* generating_logp = nullptr,
                                        std::vector<torch::Tensor>* has_generating_logp = nullptr) const;
  std::string weights_sha256();
  std::string stop_message_;  // set when the ranks agreed to stop
  // Set with stop_message_ when the job stopped because evaluation failed (eval.max_failed_steps):
  // crl's failure, so the job exits with an error, checkpointed and resumable like a stop.
  bool evaluation_failed_ = false;
  std::optional<ResumePoint> resume_;
  int64_t restart_ = 0;  // 0 for a first run, +1 per resume (the rows' restart column)
  // The contract's progress line (rank 0): stage, step/total, reward mean, loss, steps/min, ETA.
  void log_step(const StepRow& row, int64_t done, int64_t total, bool rewards);
  // Marks the start of a stage (or of its resumed part) for log_step's rate and ETA.
  void start_stage_clock(int64_t first_step);
  Clock::time_point stage_start_ = Clock::now();
  Clock::time_point last_step_end_ = Clock::now();  // rank 0: when the last /steps row was written
  int64_t stage_first_step_ = 0;
  std::unique_ptr<RankWatch> watch_;  // trainers: the node's ranks (rank_watch.h)

  const JobConfig& job_;
  RunOptions options_;
  dist::MpiRoles roles_;
  int evaluators_ = 0;
  FailingEvaluationWatch failing_evaluation_{job_.eval.max_failed_steps};  // rank 0's (after job_: reads it)
  std::optional<Suite> suite_;
  std::vector<const Task*> tasks_;
  std::string instructions_;

  // Trainers.
  torch::Device device_{torch::kCPU};
  std::unique_ptr<dist::Communicator> comm_;
  std::optional<policy::CausalLm> model_;
  std::optional<policy::ModelConfig> model_config_;
  std::optional<policy::Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_;
  // One engine for the job's life: its KV pool (and CUDA graphs) persist; it reads the model's
  // parameters in place, so every optimiser step (in-place AdamW update) is what it samples next.
  std::unique_ptr<policy::GenerationEngine> engine_;
  // LoRA (job key `lora`): attached to model_ for the job's life, so training, generation and the
  // checkpoints all see the adapted model; null for full fine-tuning.
  std::unique_ptr<policy::LoraAdapters> lora_;
  // Rank 0: the checkpoint the running stage started from (the previous stage's end; "" for the
  // first stage), recorded in every checkpoint so that a resumed stage finds the same KL reference.
  std::string stage_start_dir_, last_checkpoint_;
  int64_t policy_version_ = 0;  // optimiser steps so far, over all stages

  // Rank 0.
  std::unique_ptr<results::ResultsWriter> writer_;
  std::unique_ptr<ProgramDispatcher> dispatcher_;
  VerdictReuse verdict_reuse_;  // eval.reuse_verdicts: programs judged before, for this run of the job
  std::optional<ExemplarDatabase> exemplars_;
  int64_t next_rollout_id_ = 0;
  int64_t step_ = 0;  // the job's step counter, over all stages
  Clock::time_point job_start_ = Clock::now();
  std::string run_dir_;
};

void Job::start() {
  int world_size = 1;
  CRL_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
  const bool evaluates = std::any_of(job_.stages.begin(), job_.stages.end(), [](const StageConfig& s) { return s.kind != StageKind::kSft; });
  if (job_.trainers > world_size || (evaluates && job_.trainers >= world_size)) {
    throw InputError(fmt::format(
        "{}: roles.trainers is {} but the job runs {} MPI rank(s); {} Start {} ranks (mpirun -np {}: {} trainers plus "
        "at least one evaluator) or lower roles.trainers.",
        job_.path, job_.trainers, world_size,
        evaluates ? "stages selftrain and crl need at least one evaluator rank beside the trainers." : "",
        job_.trainers + (evaluates ? 1 : 0), job_.trainers + (evaluates ? 1 : 0), job_.trainers));
  }
  roles_ = dist::split_roles(MPI_COMM_WORLD, job_.trainers);
  evaluators_ = world_size - job_.trainers;
  suite_.emplace(Suite::load(resolve_suite_dir(job_.suite)));
  tasks_ = select_tasks(*suite_, job_);
  instructions_ = read_input_file(job_.instructions.empty() ? std::string(CRL_SOURCE_DIR) + "/docs/program-format.md" : job_.instructions,
                                 "prompt instructions");
  run_dir_ = options_.run_dir.empty() ? "runs/" + job_.name : options_.run_dir;
  find_resume_point();
}

// Rank 0 finds the newest good checkpoint and checks the job file against the one it was written
// with; every rank learns the outcome (a refusal on rank 0 ends the job there).
void Job::find_resume_point() {
  std::string text = "null";
  if (is_coordinator()) {
    const fs::path root = fs::path(run_dir_) / "checkpoints";
    if (const std::optional<fs::path> dir = policy::find_latest_checkpoint(root)) {
      const policy::CheckpointState state = policy::read_checkpoint_state(*dir);
      if (!state.user_state.contains("job_config")) {
        throw InputError(fmt::format("{}: not a checkpoint of crl run (no job_config in trainer_state.json)", dir->string()));
      }
      require_unchanged_job(state.user_state.at("job_config"), job_.as_json, options_.allow_config_change,
                            fmt::format("{} (resuming from {})", job_.path, dir->string()));
      text = nlohmann::json{{"dir", dir->string()}, {"user_state", state.user_state}}.dump();
    }
  }
  dist::Group::world().broadcast_text(text, 0);
  const nlohmann::json found = nlohmann::json::parse(text);
  if (found.is_null()) return;
  resume_ = ResumePoint::from_json(found.at("dir").get<std::string>(), found.at("user_state"));
  if (resume_->stage >= job_.stages.size()) {
    throw InputError(fmt::format("{}: the checkpoint is of stage {}, but {} has {} stage(s)", resume_->dir, resume_->stage + 1,
                                 job_.path, job_.stages.size()));
  }
  if (is_coordinator()) {
    const size_t next = resume_->stage + (resume_->stage_done ? 1 : 0);
    spdlog::info("resuming from {} ({} step {})", resume_->dir,
                 next < job_.stages.size() ? stage_kind_name(job_.stages[next].kind) : std::string("end of job"), resume_->job_step);
  }
}

JobOutcome Job::run() {
  const StopSignalHandlers stop_handlers;
  start();
  if (job_.share_gpu && job_.backend == "cuda") {
    spdlog::warn("share_gpu: trainers and evaluators share GPUs, so timings (and speedups) are noisier");
  }
  // Every rank takes part in the /meta gathers before the roles go their ways.
  write_meta();
  if (roles_.is_trainer()) {
    run_trainer();
  } else {
    run_evaluator();
  }
  // Stopped: no rank leaves (exit code 5) before all have done their part.
  if (!stop_message_.empty()) dist::Group::world().barrier();
  roles_.release();
  if (stop_message_.empty()) return {};
  if (evaluation_failed_) {
    spdlog::error("{}", stop_message_);
  } else {
    spdlog::warn("{}", stop_message_);
  }
  return {true, stop_message_, evaluation_failed_};
}

// ---- /meta -------------------------------------------------------------------------------------

void Job::write_meta() {
  const std::string role = roles_.is_trainer() ? "trainer" : "evaluator";
  const nlohmann::json me = {{"rank", roles_.world_rank}, {"role", role}, {"host", hostname()},
                             {"device", device_name(job_.backend, roles_.local_rank)}, {"pid", static_cast<int64_t>(getpid())}};
  const std::vector<std::string> all = dist::Group::world().gather_texts(me.dump(), 0);
  // Every rank learns every rank's place, for the trainers' watch over their node (rank_watch.h).
  std::string identities_text;
  if (is_coordinator()) {
    nlohmann::json list = nlohmann::json::array();
    for (const std::string& text : all) list.push_back(nlohmann::json::parse(text));
    identities_text = list.dump();
  }
  dist::Group::world().broadcast_text(identities_text, 0);
  if (roles_.is_trainer()) {
    std::vector<RankIdentity> identities;
    for (const auto& j : nlohmann::json::parse(identities_text)) {
      identities.push_back({j.at("rank").get<int>(), j.at("role").get<std::string>(), j.at("host").get<std::string>(),
                            static_cast<pid_t>(j.at("pid").get<int64_t>())});
    }
    watch_ = std::make_unique<RankWatch>(identities, roles_.world_rank, hostname(), [](const std::string& what) {
      const std::string message = what + "; ending the job (its peers would wait for it forever)";
      spdlog::error("{}", message);
      dist::abort_job(message, 4);
    });
  }
  if (!is_coordinator()) return;
  open_results_file();
  const std::string path = writer_->path();
  nlohmann::json hosts = nlohmann::json::array(), gpus = nlohmann::json::array();
  for (const std::string& text : all) {
    const auto j = nlohmann::json::parse(text);
    hosts.push_back({{"rank", j["rank"]}, {"role", j["role"]}, {"host", j["host"]}});
    gpus.push_back(j["device"]);
  }
  writer_->set_meta_json("job_config", job_.as_json);
  writer_->set_meta("job_file", job_.path);
  writer_->set_meta("git_commit", git_commit());
  writer_->set_meta_json("hosts", hosts);
  writer_->set_meta_json("gpu_names", gpus);
  writer_->set_meta_json("versions", {{"torch", TORCH_VERSION}, {"results_format", 1}});
  writer_->set_meta("share_gpu", job_.share_gpu ? "true: trainers and evaluators share GPUs, timings are noisier" : "false");
  writer_->set_meta_json("roles", {{"trainers", job_.trainers}, {"evaluators", evaluators_}});
  writer_->set_meta("restarts", std::to_string(restart_));
  writer_->flush();
  spdlog::info("job {}: {} trainer(s), {} evaluator(s), {} task(s), results in {}", job_.name, job_.trainers, evaluators_,
               tasks_.size(), path);
}

// Creates DIR/results.h5, or reopens the file of an earlier run of this run folder: its rows past
// the resume point (all of them without a checkpoint) are marked superseded, since this run
// re-does those steps; rollout ids go on from the row count, so they stay unique.
void Job::open_results_file() {
  fs::create_directories(run_dir_);
  const std::string path = run_dir_ + "/results.h5";
  int64_t steps_rows = 0, rollouts_rows = 0;
  if (fs::exists(path)) {
    const results::ResultsReader reader(path);
    const auto tables = reader.tables();
    int64_t last_restart = -1;
    for (const char* table : {"steps", "rollouts"}) {
      if (std::find(tables.begin(), tables.end(), table) == tables.end()) continue;
      const results::ColumnValues restarts = reader.column(table, "restart");  // kept alive: std::get returns into it
      for (int64_t r : std::get<std::vector<int64_t>>(restarts)) last_restart = std::max(last_restart, r);
    }
    restart_ = last_restart + 1;
    if (!resume_) {
      // No checkpoint: this run starts over; the job file must still be the one that wrote the file.
      const auto keys = reader.meta_keys();
      if (std::find(keys.begin(), keys.end(), "job_config") != keys.end()) {
        require_unchanged_job(reader.meta_json("job_config"), job_.as_json, options_.allow_config_change,
                              fmt::format("{} (results file {} from an earlier run, which left no checkpoint)", job_.path, path));
      }
    }
    restart_ = std::max<int64_t>(restart_, 1);
  } else if (resume_) {
    throw InputError(fmt::format("{} holds a checkpoint but no results file {}: restore it, or use another --run-dir",
                                 run_dir_, path));
  }
  writer_ = std::make_unique<results::ResultsWriter>(path);
  steps_rows = writer_->declare_table("steps", steps_schema());
  rollouts_rows = writer_->declare_table("rollouts", rollouts_schema());
  const int64_t keep_steps = resume_ ? resume_->steps_rows : 0, keep_rollouts = resume_ ? resume_->rollouts_rows : 0;
  if (keep_steps > steps_rows || keep_rollouts > rollouts_rows) {
    throw InputError(fmt::format("{}: the checkpoint {} covers {} /steps and {} /rollouts rows, but the file holds only {} and {}",
                                 path, resume_->dir, keep_steps, keep_rollouts, steps_rows, rollouts_rows));
  }
  writer_->set_flag("steps", "superseded", keep_steps, steps_rows, true);
  writer_->set_flag("rollouts", "superseded", keep_rollouts, rollouts_rows, true);
  if (steps_rows > keep_steps || rollouts_rows > keep_rollouts) {
    spdlog::info("{}: {} step row(s) and {} rollout row(s) written after the checkpoint are marked superseded", path,
                 steps_rows - keep_steps, rollouts_rows - keep_rollouts);
  }
  next_rollout_id_ = rollouts_rows;
}

// ---- evaluators --------------------------------------------------------------------------------

void Job::run_evaluator() {
  const int share = core_share(roles_.local_size);
  int gpu = 0;  // the rank's GPU among those it sees: its judge and workers see that one alone
#if CRL_HAVE_CUDA
  if (job_.backend == "cuda") {
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
      gpu = dist::gpu_for_local_rank(roles_.local_rank, count);
      cudaSetDevice(gpu);
    }
  }
#endif
  CompilerOptions compiler_options;
  compiler_options.jobs = static_cast<size_t>(share);  // the node's cores are shared by its ranks
  Compiler compiler(compiler_options);
  eval::EvalOptions options;
  options.backend = parse_backend(job_.backend);
  options.scale = job_.eval.scale;
  options.trials = job_.eval.trials;
  // No options.seed: each judged task draws a fresh secret (a verdict's log names it). The job's
  // seed made it job.seed + 1 for every task of every run (1 by default), and whoever knows the
  // secret knows each timed pair's checked slot before the batch: a program that computed only those
  // slots passed at the batch's size times its speed (AttackTest.AKnownSecretNamesTheCheckedSlots).
  options.timing = job_.eval.timing;
  options.time_budget_seconds = job_.eval.time_budget;
  options.call_timeout_seconds = job_.eval.call_timeout;
  options.cpu_threads = share;
  options.gpu = gpu;
  eval::Evaluator evaluator(options, compiler);
  const StopNotice stop = evaluator_loop(
      dist::Group::world(),
      [&](const WorkItem& w) {
        const Task& task = suite_->find(w.task);
        const ProgramText program = parse_program_text(w.program, w.name);
        return evaluator.evaluate(task, program, w.name);
      },
      stop_signal);
  stop_message_ = stop.stopped;
  evaluation_failed_ = stop.evaluation_failed;
}

// ---- trainers ----------------------------------------------------------------------------------

void Job::run_trainer() {
  if (job_.backend == "cuda") {
    const int count = static_cast<int>(torch::cuda::device_count());
    if (count == 0) throw InputError(fmt::format("{}: backend cuda, but this trainer sees no GPU", job_.path));
    device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(dist::gpu_for_local_rank(roles_.local_rank, count)));
  } else {
    torch::set_num_threads(core_share(roles_.local_size));
  }
  comm_ = dist::make_communicator(roles_.role_comm, device_);
  // LibTorch seeds its default generators at random per process; the job's draws (LoRA dropout)
  // must follow the job's seed, so that a run repeats and a resumed run equals an uninterrupted one.
  torch::manual_seed(seeds::torch_seed(job_.seed, roles_.role_rank));
  model_config_ = policy::load_model_config(fs::path(job_.model) / "config.json");
  model_.emplace(policy::load_causal_lm(job_.model, policy::parse_dtype(job_.dtype), device_));
  tokenizer_.emplace(policy::Tokenizer::from_file(fs::path(job_.model) / "tokenizer.json"));
  if (job_.prompt_format == PromptFormat::kChat) chat_.emplace(ChatTemplate::from_model_dir(job_.model));
  if (job_.lora.enabled) {
    policy::LoraConfig lora;
    lora.rank = job_.lora.rank;
    lora.alpha = job_.lora.alpha;
    lora.dropout = job_.lora.dropout;
    lora.target_modules = job_.lora.targets;
    lora.validate();
    // Every trainer draws the same A (the Trainer broadcasts rank 0's adapters anyway).
    lora_ = std::make_unique<policy::LoraAdapters>(*model_, lora, seeds::lora_seed(job_.seed));
  }
  if (std::any_of(job_.stages.begin(), job_.stages.end(), [](const StageConfig& s) { return s.kind != StageKind::kSft; })) {
    policy::EngineOptions engine;
    engine.kv_cache_bytes = job_.generation.kv_cache_bytes(job_.backend);
    engine.max_running = job_.generation.max_running;
    engine_ = std::make_unique<policy::GenerationEngine>(*model_, engine);
  }
  if (is_coordinator()) {
    // The exemplar database is the results file's: rebuilt from it (superseded rows left out).
    exemplars_.emplace(resume_ ? ExemplarDatabase::from_results(results::ResultsReader(writer_->path()), 0.25) : ExemplarDatabase(0.25));
    dispatcher_ = std::make_unique<ProgramDispatcher>(dist::Group::world(), job_.trainers);
  }
  size_t first_stage = 0;
  if (resume_) {
    if (policy::read_checkpoint_state(resume_->dir).lora != (lora_ != nullptr)) {
      throw InputError(fmt::format("{}: the checkpoint {} LoRA adapters, but {} {} the key 'lora'", resume_->dir,
                                   lora_ ? "holds no" : "holds", job_.path, lora_ ? "has" : "lacks"));
    }
    policy::load_checkpoint_weights(resume_->dir, *model_, lora_.get());
    step_ = resume_->job_step;
    policy_version_ = resume_->policy_version;
    stage_start_dir_ = resume_->stage_done         ? resume_->dir
                       : resume_->stage_start.empty() ? std::string()
                                                      : (fs::path(run_dir_) / "checkpoints" / resume_->stage_start).string();
    first_stage = resume_->stage + (resume_->stage_done ? 1 : 0);
    // A stage's end: its successor starts from these generator states (mid-stage: after the
    // stage's trainer is made, where the uninterrupted run stood).
    if (resume_->stage_done) policy::load_checkpoint_generators(resume_->dir, roles_.role_rank);
    if (is_coordinator() && first_stage == job_.stages.size()) spdlog::info("the job was already complete");
  }
  for (size_t i = first_stage; i < job_.stages.size() && stop_message_.empty(); ++i) {
    const StageConfig& stage = job_.stages[i];
    if (is_coordinator()) spdlog::info("stage {} of {}: {}", i + 1, job_.stages.size(), stage_kind_name(stage.kind));
    if (stage.kind == StageKind::kSft) {
      run_sft_stage(i, stage);
    } else {
      run_generating_stage(i, stage);
    }
    if (stop_message_.empty() && i + 1 < job_.stages.size()) stop_agreed(stage_kind_name(stage.kind));
  }
  if (!stop_message_.empty()) {
    if (is_coordinator()) {
      dispatcher_->stop_all({stop_message_, evaluation_failed_});
      writer_->close();
    }
    return;
  }
  watch_->disarm();  // from here ranks leave as they finish
  // The trainers' weights must be equal: the data-parallel invariant, checked once at the end.
  const std::vector<std::string> hashes = dist::Group(roles_.role_comm).gather_texts(weights_sha256(), 0);
  if (is_coordinator()) {
    writer_->set_meta_json("trainer_weight_sha256", hashes);
    dispatcher_->stop_all();
    writer_->close();
    if (std::adjacent_find(hashes.begin(), hashes.end(), std::not_equal_to<>()) != hashes.end()) {
      throw Error(fmt::format("the trainers' weights differ after the job (sha256 {}): a data-parallel bug", fmt::join(hashes, ", ")));
    }
    spdlog::info("job {} done in {:.1f} s; results in {}/results.h5", job_.name, seconds_since(job_start_), run_dir_);
  }
}

std::string Job::weights_sha256() {
  Sha256 hash;
  for (const auto& [name, tensor] : policy::state_tensors(*model_)) {
    const torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    hash.field(name);
    hash.field(std::string_view(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.nbytes())));
  }
  if (lora_) {
    for (const auto& [name, tensor] : lora_->named_parameters()) {
      const torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
      hash.field(name);
      hash.field(std::string_view(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.nbytes())));
    }
  }
  return hash.hex();
}

std::vector<int64_t> Job::prompt_ids(const std::string& prompt) const {
  const std::vector<int32_t> ids = chat_ ? chat_->apply(*tokenizer_, {{"user", prompt}}) : raw_prompt_ids(*tokenizer_, prompt);
  return {ids.begin(), ids.end()};
}

std::vector<int64_t> Job::completion_ids(const std::string& completion) const {
  const std::vector<int32_t> ids = tokenizer_->encode(completion, false, false);
  std::vector<int64_t> out(ids.begin(), ids.end());
  if (!model_config_->eos_token_ids.empty()) out.push_back(model_config_->eos_token_ids[0]);
  return out;
}

std::string Job::render_prompt(const Task& task, const std::vector<PromptExemplar>& exemplars) const {
  return build_prompt({instructions_, task.id, task.text, exemplars, true});
}

std::vector<MicroBatch> Job::micro_batches(const std::vector<Sequence>& sequences, std::vector<torch::Tensor>* advantages,
                                           std::vector<torch::Tensor>* generating_logp,
                                           std::vector<torch::Tensor>* has_generating_logp) const {
  const size_t kPerMicroBatch = static_cast<size_t>(job_.micro_batch_size);  // job key micro_batch_size
  const int64_t pad = model_config_->pad_token_id.value_or(model_config_->eos_token_ids.empty() ? 0 : model_config_->eos_token_ids[0]);
  std::vector<MicroBatch> out;
  for (size_t start = 0; start < sequences.size(); start += kPerMicroBatch) {
    const size_t end = std::min(sequences.size(), start + kPerMicroBatch);
    int64_t width = 2;
    for (size_t i = start; i < end; ++i) {
      width = std::max<int64_t>(width, static_cast<int64_t>(sequences[i].prompt->size() + sequences[i].completion->size()));
    }
    const int64_t rows = static_cast<int64_t>(end - start);
    torch::Tensor ids = torch::full({rows, width}, pad, torch::kInt64);
    torch::Tensor padding = torch::zeros({rows, width}, torch::kInt64);
    torch::Tensor loss = torch::zeros({rows, width}, torch::kInt64);
    torch::Tensor adv = torch::zeros({rows}, torch::kFloat32);
    torch::Tensor gen_logp = torch::zeros({rows, width}, torch::kFloat32);
    torch::Tensor has_gen = torch::zeros({rows}, torch::kBool);
    for (size_t i = start; i < end; ++i) {
      const Sequence& s = sequences[i];
      const int64_t r = static_cast<int64_t>(i - start);
      auto a = ids.accessor<int64_t, 2>();
      auto p = padding.accessor<int64_t, 2>();
      auto l = loss.accessor<int64_t, 2>();
      int64_t c = 0;
      for (int64_t v : *s.prompt) {
        a[r][c] = v;
        p[r][c++] = 1;
      }
      for (int64_t v : *s.completion) {
        a[r][c] = v;
        p[r][c] = 1;
        l[r][c] = s.train && c > 0 ? 1 : 0;  // column 0 is never a target
        ++c;
      }
      adv[r] = static_cast<float>(s.advantage);
      if (s.generating_logp != nullptr) {
        if (s.generating_logp->size() != s.completion->size()) throw Error("a rollout's log-probs do not match its tokens");
        auto g = gen_logp.accessor<float, 2>();
        const int64_t p0 = static_cast<int64_t>(s.prompt->size());
        for (size_t j = 0; j < s.generating_logp->size(); ++j) g[r][p0 + static_cast<int64_t>(j)] = (*s.generating_logp)[j];
        has_gen[r] = true;
      }
    }
    out.push_back({ids.to(device_), padding.to(device_), loss.to(device_)});
    if (advantages != nullptr) advantages->push_back(adv.to(device_));
    if (generating_logp != nullptr) generating_logp->push_back(gen_logp.to(device_));
    if (has_generating_logp != nullptr) has_generating_logp->push_back(has_gen.to(device_));
  }
  return out;
}

std::unique_ptr<Trainer> Job::make_trainer(const StageConfig& stage, int64_t optimiser_steps) {
  TrainerOptions options;
  options.schedule = LrSchedule{stage.lr, std::min(stage.warmup, optimiser_steps), std::max<int64_t>(1, optimiser_steps), 0.1};
  return std::make_unique<Trainer>(*model_, options, *comm_, lora_.get());
}

// Whether `dir` is a finished checkpoint written at a stage's end (trainer_state.json says so).
bool is_stage_end_checkpoint(const fs::path& dir, size_t* stage = nullptr) {
  if (!fs::exists(dir / "DONE")) return false;
  try {
    const nlohmann::json user = policy::read_checkpoint_state(dir).user_state;
    if (!user.value("stage_done", false)) return false;
    if (stage) *stage = user.at("stage").get<size_t>();
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

policy::CausalLm Job::stage_start_model(size_t index) {
  std::string dir = job_.model;
  if (index > 0) {
    if (is_coordinator() && !stage_start_dir_.empty()) {
      dir = stage_start_dir_;
    } else if (is_coordinator()) {  // a checkpoint that did not record it: the newest end of the stage before
      const fs::path root = fs::path(run_dir_) / "checkpoints";
      dir.clear();
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(root, ec)) {
        size_t stage = 0;
        const std::string name = entry.path().filename().string();
        if (name.rfind("step-", 0) == 0 && is_stage_end_checkpoint(entry.path(), &stage) && stage + 1 == index &&
            entry.path().string() > dir) {
          dir = entry.path().string();
        }
      }
      if (dir.empty()) {
        throw InputError(fmt::format("{}: no checkpoint of the end of stage {}, which stage {}'s KL reference is; was it deleted?",
                                     root.string(), index, index + 1));
      }
    }
    dist::Group(roles_.role_comm).broadcast_text(dir, 0);
  }
  if (is_coordinator()) spdlog::info("stage {}: KL reference: the weights it started from, {}", index + 1, dir);
  return policy::load_causal_lm(dir, policy::parse_dtype(job_.dtype), device_);
}

std::string generator_states_text() {
  nlohmann::json states = nlohmann::json::array();
  for (const auto& [name, state] : policy::generator_states()) {
    const torch::Tensor bytes = state.to(torch::kCPU).contiguous();
    if (bytes.scalar_type() != torch::kUInt8) throw Error(fmt::format("generator state {} is not bytes", name));
    const auto* data = bytes.data_ptr<uint8_t>();
    states.push_back({{"name", name}, {"state", nlohmann::json::binary(std::vector<uint8_t>(data, data + bytes.numel()))}});
  }
  const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(states);
  return std::string(cbor.begin(), cbor.end());
}

policy::NamedTensors generator_states_from_text(const std::string& text, int rank) {
  policy::NamedTensors out;
  try {
    for (const auto& item : nlohmann::json::from_cbor(text)) {
      const auto& bytes = item.at("state").get_binary();
      torch::Tensor t = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
      std::copy(bytes.begin(), bytes.end(), t.data_ptr<uint8_t>());
      out.emplace_back(item.at("name").get<std::string>(), t);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("trainer rank {} sent unreadable generator states: {}", rank, e.what()));
  }
  return out;
}

void Job::save_checkpoint(const StageConfig& stage, Trainer& trainer, size_t stage_index, int64_t stage_steps, bool stage_done,
                          const RewardNormalizer* normalizer, const GeneratedStep* in_flight) {
  const std::vector<std::string> states = dist::Group(roles_.role_comm).gather_texts(generator_states_text(), 0);
  // Every trainer alike has a step in flight or none (the same control flow).
  const std::vector<std::string> in_flight_parts =
      in_flight ? dist::Group(roles_.role_comm).gather_texts(in_flight_part(*in_flight).dump(), 0) : std::vector<std::string>();
  if (is_coordinator()) {
    const fs::path root = fs::path(run_dir_) / "checkpoints";
    policy::CheckpointContents contents;
    contents.model = &*model_;
    contents.lora = lora_.get();  // LoRA: the PEFT adapter (in adapter/) beside the merged model
    contents.base_model = job_.model;
    contents.optimizer = &trainer.optimizer();
    contents.schedule = trainer.options().schedule.to_json();
    contents.step = step_;
    for (size_t r = 0; r < states.size(); ++r) contents.rank_generator_states.push_back(generator_states_from_text(states[r], static_cast<int>(r)));
    writer_->flush();  // the rows the checkpoint counts are on disk before it exists
    contents.user_state = {{"job_config", job_.as_json},
                           {"stage", stage_index},
                           {"stage_steps", stage_steps},
                           {"stage_done", stage_done},
                           {"job_step", step_},
                           {"policy_version", policy_version_},
                           {"normalizer", normalizer ? normalizer->to_json() : nlohmann::json()},
                           {"rows", {{"steps", writer_->rows("steps")}, {"rollouts", writer_->rows("rollouts")}}},
                           {"restart", restart_}};
    if (in_flight) {
      contents.user_state["in_flight"] = {{"job_step", in_flight->job_step},
                                          {"local_step", in_flight->local_step},
                                          {"plan", in_flight->plan},
                                          {"trainers", in_flight_parts}};
    }
    contents.user_state["stage_start"] = stage_start_dir_.empty() ? "" : fs::path(stage_start_dir_).filename().string();
    const fs::path dir = policy::save_checkpoint(root, contents);
    last_checkpoint_ = dir.string();
    // Keep the newest `keep` finished ones (a DONE marker; not re-hashed here: resume checks them).
    std::vector<fs::path> dirs;
    for (const auto& entry : fs::directory_iterator(root)) {
      if (entry.is_directory() && entry.path().filename().string().rfind("step-", 0) == 0) dirs.push_back(entry.path());
    }
    std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) { return a.filename() > b.filename(); });
    int64_t kept = 0;
    for (const fs::path& d : dirs) {
      if (d != dir && is_stage_end_checkpoint(d)) continue;  // a later stage's KL reference, and the stage's result
      if (d != dir && (kept >= stage.checkpoint.keep || !fs::exists(d / "DONE"))) {
        std::error_code ec;
        fs::remove_all(d, ec);
      } else {
        ++kept;
      }
    }
    spdlog::info("checkpoint {}", dir.string());
  }
  dist::Group(roles_.role_comm).barrier();  // every trainer agrees the checkpoint is complete
}

bool Job::stop_agreed(const std::string& stage_name) {
  int mine = stop_signal();
  if (is_coordinator() && mine == 0) mine = dispatcher_->take_stop_signal();
  if (comm_->all_reduce_scalar(mine != 0 ? 1.0 : 0.0) == 0) return false;
  // Which signal, for the message: rank 0's, else the first trainer's that has one.
  const std::vector<std::string> signals = dist::Group(roles_.role_comm).gather_texts(std::to_string(mine), 0);
  std::string message;
  if (is_coordinator()) {
    int signal = 0;
    for (const std::string& text : signals) {
      if (signal == 0) signal = std::stoi(text);
    }
    message = fmt::format("stopped at {} step {} ({}); run the same command to resume", stage_name, step_ - 1, signal_name(signal));
  }
  dist::Group(roles_.role_comm).broadcast_text(message, 0);
  stop_message_ = message;
  watch_->disarm();  // the ranks leave once the checkpoint is written
  return true;
}

void Job::finish_stage(size_t index, const StageConfig& stage, Trainer& trainer) {
  save_checkpoint(stage, trainer, index, 0, true, nullptr);
  stage_start_dir_ = last_checkpoint_;  // the next stage starts from it (rank 0)
}

void Job::start_stage_clock(int64_t first_step) {
  stage_start_ = Clock::now();
  last_step_end_ = stage_start_;
  stage_first_step_ = first_step;
}

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

void Job::log_step(const StepRow& row, int64_t done, int64_t total, bool rewards) {
  // The rate over this process's steps of the stage (a resumed stage counts from its resume).
  const double minutes = seconds_since(stage_start_) / 60.0;
  const int64_t here = done - stage_first_step_;
  const double per_minute = minutes > 0 && here > 0 ? static_cast<double>(here) / minutes : 0;
  const double eta_seconds = per_minute > 0 ? 60.0 * static_cast<double>(total - done) / per_minute : NAN;
  const int64_t rollouts = row.n_ok + row.n_compile_error + row.n_runtime_error + row.n_timeout + row.n_crash + row.n_mismatch +
                           row.n_hack + row.n_format_error + row.n_internal_error;
  const std::string reward = rewards ? fmt::format(", reward mean {:.3f}", row.reward_mean) : "";
  const std::string detail =
      rewards ? fmt::format(" | rollouts {}: ok {}, format_error {}{} | evaluators busy {:.0f}%, trainers waited {:.1f} s", rollouts,
                            row.n_ok, row.n_format_error,
                            // crl's own failures, shown only when there are some: left out of the rewards
                            row.n_internal_error > 0 ? fmt::format(", internal_error {}", row.n_internal_error) : std::string(),
                            100 * row.evaluator_busy_fraction, row.trainer_wait_seconds)
              : "";
  spdlog::info("[{}] step {} ({}/{}){}, loss {:.4f}{}, {:.1f} steps/min, ETA {} | grad_norm {:.3f}, lr {:.2e}{}", row.stage,
               row.step, done, total, reward, row.loss, row.skipped ? " (skipped)" : "", per_minute, duration_text(eta_seconds),
               row.grad_norm, row.lr, detail);
}

// ---- sft ---------------------------------------------------------------------------------------

void Job::run_sft_stage(size_t index, const StageConfig& stage) {
  const std::vector<SftExample> examples = read_sft_jsonl(stage.data);
  if (examples.empty()) throw InputError(fmt::format("{}: no examples", stage.data));
  for (const SftExample& e : examples) suite_->find(e.task);
  const int64_t per_epoch = (static_cast<int64_t>(examples.size()) + stage.batch - 1) / stage.batch;
  const int64_t total = per_epoch * stage.epochs;
  auto trainer = make_trainer(stage, total);
  int64_t first = 0;  // the data cursor: batches done
  if (const ResumePoint* resume = resuming_stage(index)) {
    first = resume->stage_steps;
    policy::load_checkpoint_optimizer(resume->dir, trainer->optimizer());
    policy::load_checkpoint_generators(resume->dir, roles_.role_rank);
  }
  std::vector<size_t> order(examples.size());
  start_stage_clock(first);
  for (int64_t done = first; done < total; ++done) {
    const int64_t epoch = done / per_epoch, b = done % per_epoch;
    if (done == first || b == 0) {  // the epoch's order, from the seed: the same after a resume
      std::iota(order.begin(), order.end(), 0);
      std::mt19937_64 rng(seeds::sft_shuffle_seed(job_.seed, index, epoch));
      std::shuffle(order.begin(), order.end(), rng);
    }
    {
      std::vector<std::vector<int64_t>> prompts, completions;
      for (int64_t i = b * stage.batch; i < std::min<int64_t>((b + 1) * stage.batch, static_cast<int64_t>(order.size())); ++i) {
        if (i % roles_.role_size != roles_.role_rank) continue;
        const SftExample& e = examples[order[static_cast<size_t>(i)]];
        prompts.push_back(prompt_ids(render_prompt(suite_->find(e.task), {})));
        completions.push_back(completion_ids(e.completion));
      }
      std::vector<Sequence> seqs;
      for (size_t i = 0; i < prompts.size(); ++i) seqs.push_back({&prompts[i], &completions[i], true, 0});
      static const std::vector<int64_t> kDummy = {0, 0};
      if (seqs.empty()) seqs.push_back({&kDummy, &kDummy, false, 0});  // this rank has no example in a short batch
      const auto batches = micro_batches(seqs, nullptr);
      const auto train_start = Clock::now();
      const int64_t version = policy_version_;
      const StepStats stats = trainer->step(batches, [&](const torch::Tensor& logits, size_t i) {
        return sft_loss(logits, batches[i].input_ids, batches[i].loss_mask).sum;
      });
      if (!stats.skipped) ++policy_version_;  // a skipped step (non-finite gradient) changed nothing
      if (is_coordinator()) {
        StepRow row;
        row.step = step_;
        row.stage = "sft";
        row.policy_version = version;
        row.loss = stats.loss;
        row.grad_norm = stats.grad_norm;
        row.lr = stats.lr;
        row.skipped = stats.skipped || !std::isfinite(stats.loss);
        row.tokens_trained = stats.tokens;
        row.seconds_train = seconds_since(train_start);
        row.restart = restart_;
        writer_->append("steps", step_rows({row}));
        writer_->flush();
        log_step(row, done + 1, total, false);
      }
      ++step_;
      const bool periodic = stage.checkpoint.every > 0 && (done + 1) % stage.checkpoint.every == 0 && done + 1 < total;
      if (periodic) save_checkpoint(stage, *trainer, index, done + 1, false, nullptr);
      if (done + 1 < total && stop_agreed("sft")) {
        if (!periodic) save_checkpoint(stage, *trainer, index, done + 1, false, nullptr);
        return;
      }
    }
  }
  finish_stage(index, stage, *trainer);
}

// ---- selftrain and crl -------------------------------------------------------------------------

nlohmann::json Job::make_plan(const StageConfig& stage, int64_t job_step) {
  std::string plan_text;
  if (is_coordinator()) {
    const bool crl = stage.kind == StageKind::kCrl;
    std::mt19937_64 rng(seeds::exemplar_seed(job_.seed, job_step));
    nlohmann::json plan = nlohmann::json::array();
    for (const Task* task : draw_tasks(tasks_, stage.batch, job_.seed, job_step)) {
      std::vector<PromptExemplar> shown;
      std::vector<int64_t> ids;
      if (crl && stage.exemplars > 0) {
        for (const Exemplar* e : exemplars_->sample(task->id, static_cast<size_t>(stage.exemplars), stage.tau, rng)) {
          shown.push_back({e->program, e->speedup});
          ids.push_back(e->rollout_id);
        }
      }
      plan.push_back({{"task", task->id}, {"prompt", render_prompt(*task, shown)}, {"exemplar_ids", join_ids(ids)}});
    }
    plan_text = plan.dump();
  }
  dist::Group(roles_.role_comm).broadcast_text(plan_text, 0);
  return nlohmann::json::parse(plan_text);
}

std::vector<std::vector<int64_t>> Job::my_group_prompts(const nlohmann::json& plan, int64_t groups) const {
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(groups));
  for (int64_t g = roles_.role_rank; g < groups; g += roles_.role_size) {
    out[static_cast<size_t>(g)] = prompt_ids(plan.at(static_cast<size_t>(g)).at("prompt").get<std::string>());
  }
  return out;
}

Job::GeneratedStep Job::generate_step(const StageConfig& stage, nlohmann::json plan, int64_t job_step, int64_t local_step) {
  const auto start = Clock::now();
  GeneratedStep out;
  out.job_step = job_step;
  out.local_step = local_step;
  out.policy_version = policy_version_;
  out.plan = std::move(plan);
  const int64_t groups = stage.batch, group_size = stage.group;
  out.group_prompts = my_group_prompts(out.plan, groups);
  // All of this trainer's groups (g = rank, rank + T, ...) in one engine run: each prompt is
  // prefilled once for its G samples. Sample keys are the flat index among this trainer's rollouts.
  std::vector<policy::GenerationRequest> requests;
  std::vector<int64_t> request_group;
  const int64_t block_size = policy::EngineOptions{}.block_size;
  for (int64_t g = roles_.role_rank; g < groups; g += roles_.role_size) {
    const std::vector<int64_t>& prompt = out.group_prompts[static_cast<size_t>(g)];
    const auto need = policy::GenerationEngine::block_need(static_cast<int64_t>(prompt.size()), stage.sampling.max_new_tokens, block_size);
    if (need.prompt_blocks + need.own_blocks > engine_->usable_blocks()) {
      throw InputError(fmt::format("{}: a prompt of {} tokens with sampling.max_new_tokens {} needs {} KV cache blocks, but "
                                   "generation.kv_cache_mib holds {}: raise generation.kv_cache_mib (or lower max_new_tokens)",
                                   job_.path, prompt.size(), stage.sampling.max_new_tokens, need.prompt_blocks + need.own_blocks,
                                   engine_->usable_blocks()));
    }
    requests.push_back({prompt, group_size, static_cast<int64_t>(request_group.size()) * group_size, std::nullopt});
    request_group.push_back(g);
  }
  if (!requests.empty()) {
    policy::GenerationOptions gen;
    gen.max_new_tokens = stage.sampling.max_new_tokens;
    gen.sampling = {stage.sampling.temperature, stage.sampling.top_p, stage.sampling.top_k,
                    seeds::sampling_seed(job_.seed, job_step, roles_.role_rank)};
    gen.stop_token_ids = model_config_->eos_token_ids;
    gen.pad_token_id = model_config_->pad_token_id.value_or(gen.stop_token_ids.empty() ? 0 : gen.stop_token_ids[0]);
    const policy::TokenDecoder decode = [&](const std::vector<int64_t>& ids) {
      return tokenizer_->decode_sampled(ids, /*skip_special_tokens=*/true);
    };
    policy::GenerationResult result = engine_->run(requests, gen, decode);
    size_t i = 0;
    for (int64_t g : request_group) {
      for (int64_t s = 0; s < group_size; ++s, ++i) {
        policy::GeneratedSequence& seq = result.sequences[i];
        out.mine.push_back({g, s, std::move(seq.tokens), std::move(seq.text), std::move(seq.model_logprobs)});
      }
    }
  }
  // Planted completions (tests): in the stage's first step, in place of the first samples of the
  // first group of their task. No policy wrote them: they have no generating log-probs.
  if (local_step == 0) {
    std::map<int64_t, int64_t> used;
    for (const PlantedCompletion& p : stage.planted) {
      int64_t g = 0;
      while (g < groups && out.plan[static_cast<size_t>(g)]["task"] != p.task) ++g;
      if (g == groups) {
        if (is_coordinator()) spdlog::warn("planted completion {}: task {} is not in the first step's batch", p.file, p.task);
        continue;
      }
      const int64_t s = used[g]++;
      if (s >= group_size || g % roles_.role_size != roles_.role_rank) continue;
      for (Rollout& r : out.mine) {
        if (r.group == g && r.sample == s) {
          r.text = completion_from_program(read_input_file(p.file, "planted completion"));
          r.completion_ids = completion_ids(r.text);
          r.logprobs.clear();
        }
      }
    }
  }
  out.seconds = seconds_since(start);
  out.finished = Clock::now();
  return out;
}

// This trainer's share of a generated step, for a checkpoint written while the step is in flight.
nlohmann::json Job::in_flight_part(const GeneratedStep& g) const {
  nlohmann::json rollouts = nlohmann::json::array();
  for (const Rollout& r : g.mine) {
    rollouts.push_back({{"group", r.group}, {"sample", r.sample}, {"tokens", r.completion_ids}, {"text", r.text}, {"logprobs", r.logprobs}});
  }
  return {{"policy_version", g.policy_version}, {"seconds", g.seconds}, {"rollouts", rollouts}};
}

Job::GeneratedStep Job::in_flight_from_checkpoint(const ResumePoint& resume, const StageConfig& stage) const {
  const std::string origin = resume.dir + "/trainer_state.json";
  try {
    const nlohmann::json& f = resume.in_flight;
    GeneratedStep out;
    out.job_step = f.at("job_step").get<int64_t>();
    out.local_step = f.at("local_step").get<int64_t>();
    if (out.job_step != resume.job_step || out.local_step != resume.stage_steps) {
      throw InputError(fmt::format("its in-flight step ({}, stage step {}) is not the next step ({}, stage step {})", out.job_step,
                                   out.local_step, resume.job_step, resume.stage_steps));
    }
    out.plan = f.at("plan");
    if (!out.plan.is_array() || static_cast<int64_t>(out.plan.size()) != stage.batch) throw InputError("its in-flight plan has the wrong size");
    const auto& trainers = f.at("trainers");
    if (!trainers.is_array() || static_cast<int>(trainers.size()) != roles_.role_size) {
      throw InputError(fmt::format("its in-flight step holds {} trainers' rollouts; this run has {} trainers", trainers.size(), roles_.role_size));
    }
    const nlohmann::json part = nlohmann::json::parse(trainers.at(static_cast<size_t>(roles_.role_rank)).get<std::string>());
    out.policy_version = part.at("policy_version").get<int64_t>();
    out.seconds = part.at("seconds").get<double>();
    for (const auto& r : part.at("rollouts")) {
      Rollout rollout{r.at("group").get<int64_t>(), r.at("sample").get<int64_t>(), r.at("tokens").get<std::vector<int64_t>>(),
                      r.at("text").get<std::string>(), r.at("logprobs").get<std::vector<float>>()};
      if (rollout.group < 0 || rollout.group >= stage.batch || rollout.sample < 0 || rollout.sample >= stage.group ||
          (!rollout.logprobs.empty() && rollout.logprobs.size() != rollout.completion_ids.size())) {
        throw InputError(fmt::format("in-flight rollout (group {}, sample {}) does not fit the stage", rollout.group, rollout.sample));
      }
      out.mine.push_back(std::move(rollout));
    }
    out.group_prompts = my_group_prompts(out.plan, stage.batch);
    out.finished = Clock::now();
    return out;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: the in-flight step is unreadable: {}", origin, e.what()));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", origin, e.what()));
  }
}

void Job::run_generating_stage(size_t index, const StageConfig& stage) {
  const bool crl = stage.kind == StageKind::kCrl;
  const bool stale = stage.max_staleness > 0;
  const int64_t updates = crl ? stage.updates_per_batch : 1;
  auto trainer = make_trainer(stage, stage.steps * updates);
  RewardNormalizer normalizer(stage.reward.window, stage.reward.clip);
  std::optional<policy::CausalLm> reference;  // the policy the stage started from, for the KL penalty
  if (crl && stage.grpo.kl > 0) reference.emplace(stage_start_model(index));
  const int64_t groups = stage.batch, group_size = stage.group;
  const std::string stage_name = stage_kind_name(stage.kind);
  if (is_coordinator()) exemplars_->set_bucket_width(stage.bucket_width);
  int64_t first = 0;
  std::optional<GeneratedStep> current;  // the step whose rollouts are generated and not yet judged
  if (const ResumePoint* resume = resuming_stage(index)) {
    first = resume->stage_steps;
    policy::load_checkpoint_optimizer(resume->dir, trainer->optimizer());
    if (!resume->normalizer.is_null()) normalizer.load_json(resume->normalizer, resume->dir + "/trainer_state.json");
    policy::load_checkpoint_generators(resume->dir, roles_.role_rank);
    // Staleness 1: the checkpoint holds the step that was generated (by the policy before the
    // last update) while the last step was judged; it is judged now, not generated again.
    if (!resume->in_flight.is_null()) {
      current = in_flight_from_checkpoint(*resume, stage);
      if (is_coordinator()) {
        spdlog::info("{} step {} generated before the checkpoint (by policy version {}) is judged now, not generated again",
                     stage_name, current->job_step, current->policy_version);
      }
    }
  }

  start_stage_clock(first);
  if (!current && first < stage.steps) current = generate_step(stage, make_plan(stage, step_), step_, first);
  for (int64_t local_step = first; local_step < stage.steps; ++local_step) {
    // The step's plan and this trainer's rollouts are in `current` (generated at the end of the
    // previous step, or overlapped with its evaluation); with staleness 1 the next step is
    // generated while the evaluators judge this one.
    const bool overlap = stale && local_step + 1 < stage.steps;
    const nlohmann::json& plan = current->plan;
    std::vector<Rollout>& mine = current->mine;
    int64_t my_tokens = 0;
    for (const Rollout& r : mine) my_tokens += static_cast<int64_t>(r.completion_ids.size());
    const double tokens_generated = comm_->all_reduce_scalar(static_cast<double>(my_tokens));
    const double seconds_generate = comm_->all_reduce_scalar(current->seconds) / roles_.role_size;

    // 3. Completions to rank 0; parse, evaluate, shape; the outcome back to every trainer.
    nlohmann::json sent = nlohmann::json::array();
    for (const Rollout& r : mine) {
      sent.push_back({{"group", r.group}, {"sample", r.sample}, {"text", r.text}, {"tokens", r.completion_ids.size()}});
    }
    auto wait_start = Clock::now();
    const std::vector<std::string> received = dist::Group(roles_.role_comm).gather_texts(sent.dump(), 0);
    // Staleness 1: the next step's plan (from the exemplars known before this step's verdicts).
    nlohmann::json next_plan;
    if (overlap) next_plan = make_plan(stage, step_ + 1);
    std::optional<GeneratedStep> next;
    const auto generate_next = [&]() {
#if CRL_HAVE_CUDA
      if (device_.is_cuda()) {
        int count = 0;
        if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) cudaSetDevice(device_.index());
      }
#endif
      return generate_step(stage, next_plan, step_ + 1, local_step + 1);
    };
    std::string outcome_text;
    StepRow row;
    std::vector<RolloutRow> rollout_rows_out;
    struct StepText {
      const char* store;
      int64_t id;
      std::string text;
    };
    std::vector<StepText> texts;  // rank 0: written after the step's rows
    double evaluate_seconds = 0;
    if (is_coordinator()) {
      const int64_t n = groups * group_size;
      std::vector<nlohmann::json> by_index(static_cast<size_t>(n));
      for (const std::string& text : received) {
        for (auto& r : nlohmann::json::parse(text)) {
          const int64_t index = r.at("group").get<int64_t>() * group_size + r.at("sample").get<int64_t>();
          if (index < 0 || index >= n) throw Error(fmt::format("a trainer sent rollout index {} of {}", index, n));
          by_index[static_cast<size_t>(index)] = std::move(r);
        }
      }
      const int64_t first_id = next_rollout_id_;
      next_rollout_id_ += n;
      std::vector<WorkItem> work;
      std::vector<ParsedCompletion> parsed(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t id = first_id + i;
        parsed[static_cast<size_t>(i)] = parse_completion(by_index[static_cast<size_t>(i)]["text"].get<std::string>(), fmt::format("rollout {}", id));
        if (parsed[static_cast<size_t>(i)].ok) {
          work.push_back({id, plan[static_cast<size_t>(i / group_size)]["task"].get<std::string>(), parsed[static_cast<size_t>(i)].program_text,
                          fmt::format("rollout {}", id)});
        }
      }
      // Rank 0 dispatches on this thread (every MPI call stays here) while its own share of the
      // next step is generated on another (no MPI there; torch only).
      std::future<GeneratedStep> pending;
      if (overlap) pending = std::async(std::launch::async, generate_next);
      const auto evaluate_start = Clock::now();
      std::map<int64_t, DispatchedVerdict> verdicts;
      if (job_.eval.reuse_verdicts) {
        const size_t programs = work.size();
        verdicts = verdict_reuse_.evaluate(std::move(work), step_, [&](const std::vector<WorkItem>& w) { return dispatcher_->evaluate(w); });
        if (verdict_reuse_.reused_last() + verdict_reuse_.audits_last() > 0) {
          spdlog::info("step {}: {} of {} programs judged before (eval.reuse_verdicts), {} of them judged again as audits",
                       step_, verdict_reuse_.reused_last() + verdict_reuse_.audits_last(), programs, verdict_reuse_.audits_last());
        }
      } else {
        verdicts = dispatcher_->evaluate(work);
      }
      evaluate_seconds = seconds_since(evaluate_start);
      if (overlap) {
        next = pending.get();
        wait_start = next->finished;
      }
      double busy = 0;
      for (const auto& [id, v] : verdicts) busy += v.seconds;
      // Rewards and which rollouts count.
      std::vector<double> rewards(static_cast<size_t>(n), 0.0);
      std::vector<bool> included(static_cast<size_t>(n), true);
      std::vector<eval::Verdict> all(static_cast<size_t>(n));
      std::vector<int> evaluator_rank(static_cast<size_t>(n), -1);
      int64_t judged = 0, internal_errors = 0;
      std::string first_internal;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t id = first_id + i;
        eval::Verdict& v = all[static_cast<size_t>(i)];
        if (const auto it = verdicts.find(id); it != verdicts.end()) {
          v = it->second.verdict;
          evaluator_rank[static_cast<size_t>(i)] = it->second.evaluator_rank;
        } else {
          v.task_id = plan[static_cast<size_t>(i / group_size)]["task"];
          v.candidate = fmt::format("rollout {}", id);
          v.status = eval::VerdictStatus::kFormatError;
          v.message = parsed[static_cast<size_t>(i)].problem;
          v.reward = 0;
        }
        rewards[static_cast<size_t>(i)] = v.status == eval::VerdictStatus::kInternalError ? 0.0 : v.reward;
        included[static_cast<size_t>(i)] = v.status != eval::VerdictStatus::kInternalError;
        if (v.status != eval::VerdictStatus::kFormatError) ++judged;
        if (v.status == eval::VerdictStatus::kInternalError) {
          ++internal_errors;
          // Its message carries the judge's log: the start of it is the cause, the rest is in /text/logs.
          if (first_internal.empty()) first_internal = fmt::format("{} ({}): {}", v.candidate, v.task_id, v.message.substr(0, 1500));
        }
      }
      const std::string evaluation_failure = failing_evaluation_.step(step_, judged, internal_errors, first_internal);
      ShapedRewards shaped;
      std::vector<bool> train(static_cast<size_t>(n), false);
      if (crl) {
        shaped = shape_rewards(rewards, included, group_size, normalizer);
        train = included;
      } else {
        shaped.normalized.assign(static_cast<size_t>(n), 0.0);
        shaped.advantages.assign(static_cast<size_t>(n), 0.0);
        for (int64_t i = 0; i < n; ++i) {
          const auto& v = all[static_cast<size_t>(i)];
          train[static_cast<size_t>(i)] = v.ok() && v.speedup >= stage.min_speedup;
        }
      }
      int64_t train_rollouts = 0;
      for (bool t : train) train_rollouts += t ? 1 : 0;
      nlohmann::json outcome_json = {{"advantages", shaped.advantages}, {"train", train}, {"train_rollouts", train_rollouts}};
      if (!evaluation_failure.empty()) outcome_json["evaluation_failed"] = evaluation_failure;
      outcome_text = outcome_json.dump();

      // The step's rows (the loss columns are filled in after the update).
      std::vector<double> counted;
      for (int64_t i = 0; i < n; ++i) {
        const eval::Verdict& v = all[static_cast<size_t>(i)];
        const int64_t id = first_id + i;
        const auto& plan_item = plan[static_cast<size_t>(i / group_size)];
        RolloutRow r;
        r.rollout_id = id;
        r.step = step_;
        r.stage = stage_name;
        r.task = plan_item["task"];
        r.group = i / group_size;
        r.sample = i % group_size;
        r.status = v.status_text();
        r.speedup = v.speedup;
        r.speedup_ci_low = v.speedup_ci_low;
        r.speedup_ci_high = v.speedup_ci_high;
        r.candidate_median_us = v.candidate_time.median_us;
        r.reference_median_us = v.reference_time.median_us;
        r.scale = v.scale.empty() ? job_.eval.scale : v.scale;
        r.reward = rewards[static_cast<size_t>(i)];
        r.normalized_reward = shaped.normalized[static_cast<size_t>(i)];
        r.advantage = shaped.advantages[static_cast<size_t>(i)];
        r.completion_tokens = by_index[static_cast<size_t>(i)]["tokens"];
        r.evaluator_rank = evaluator_rank[static_cast<size_t>(i)];
        r.exemplar_ids = plan_item["exemplar_ids"];
        r.policy_version = current->policy_version;
        r.restart = restart_;
        rollout_rows_out.push_back(r);
        switch (v.status) {
          case eval::VerdictStatus::kOk: ++row.n_ok; break;
          case eval::VerdictStatus::kCompileError: ++row.n_compile_error; break;
          case eval::VerdictStatus::kRuntimeError: ++row.n_runtime_error; break;
          case eval::VerdictStatus::kTimeout: ++row.n_timeout; break;
          case eval::VerdictStatus::kCrash: ++row.n_crash; break;
          case eval::VerdictStatus::kMismatch: ++row.n_mismatch; break;
          case eval::VerdictStatus::kHack: ++row.n_hack; break;
          case eval::VerdictStatus::kFormatError: ++row.n_format_error; break;
          case eval::VerdictStatus::kInternalError: ++row.n_internal_error; break;
        }
        if (included[static_cast<size_t>(i)]) counted.push_back(rewards[static_cast<size_t>(i)]);
        // Texts keyed by rollout id.
        texts.push_back({"prompts", id, plan_item["prompt"].get<std::string>()});
        texts.push_back({"completions", id, by_index[static_cast<size_t>(i)]["text"].get<std::string>()});
        if (!parsed[static_cast<size_t>(i)].program_text.empty()) texts.push_back({"programs", id, parsed[static_cast<size_t>(i)].program_text});
        std::string log = v.message;
        for (const auto& s : v.steps) {
          if (s.name == "judge") log += "\n--- judge\n" + s.detail;  // its secret replays the task's inputs
        }
        if (!v.compile_log.empty()) log += "\n--- compile log\n" + v.compile_log;
        if (!v.worker_log.empty()) log += "\n--- worker log\n" + v.worker_log;
        texts.push_back({"logs", id, std::move(log)});
        if (v.ok() && std::isfinite(v.speedup) && v.speedup > 0) {
          exemplars_->add({id, step_, r.task, parsed[static_cast<size_t>(i)].program_text, v.speedup,
                           parse_ids(r.exemplar_ids, "plan")});
        }
      }
      if (!counted.empty()) {
        std::vector<double> sorted = counted;
        std::sort(sorted.begin(), sorted.end());
        row.reward_mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(sorted.size());
        row.reward_median = median(sorted);
        row.reward_max = sorted.back();
      }
      row.seconds_evaluate = evaluate_seconds;
      row.evaluator_busy_fraction = evaluate_seconds > 0 && evaluators_ > 0 ? busy / (evaluate_seconds * evaluators_) : 0;
    } else if (overlap) {
      next = generate_next();
      wait_start = next->finished;
    }
    dist::Group(roles_.role_comm).broadcast_text(outcome_text, 0);
    const double waited = seconds_since(wait_start);
    const nlohmann::json outcome = nlohmann::json::parse(outcome_text);
    const double trainer_wait = comm_->all_reduce_scalar(waited);

    // 4. The update on this trainer's rollouts.
    const auto train_start = Clock::now();
    StepStats stats;
    bool skipped = outcome["train_rollouts"].get<int64_t>() == 0;
    if (!skipped) {
      std::vector<Sequence> seqs;
      for (const Rollout& r : mine) {
        const size_t i = static_cast<size_t>(r.group * group_size + r.sample);
        seqs.push_back({&current->group_prompts[static_cast<size_t>(r.group)], &r.completion_ids, outcome["train"][i].get<bool>(),
                        outcome["advantages"][i].get<double>(), r.logprobs.empty() ? nullptr : &r.logprobs});
      }
      static const std::vector<int64_t> kDummy = {0, 0};
      if (seqs.empty()) seqs.push_back({&kDummy, &kDummy, false, 0, nullptr});  // more trainers than groups
      std::vector<torch::Tensor> advantages, generating_logp, has_generating_logp;
      const auto batches = micro_batches(seqs, &advantages, stale ? &generating_logp : nullptr, stale ? &has_generating_logp : nullptr);
      std::vector<torch::Tensor> old_logp, ref_logp;
      if (crl && (updates > 1 || reference)) {
        torch::NoGradGuard no_grad;
        for (const auto& mb : batches) {
          if (updates > 1) old_logp.push_back(next_token_log_probs(trainer->forward(mb), mb.input_ids).detach());
          if (reference) ref_logp.push_back(next_token_log_probs((*reference)->forward(mb.input_ids), mb.input_ids));
        }
      }
      const GrpoOptions grpo{stage.grpo.clip, stage.grpo.clip_high, stage.grpo.kl};
      for (int64_t u = 0; u < updates; ++u) {
        stats = trainer->step(batches, [&](const torch::Tensor& logits, size_t i) {
          const auto& mb = batches[i];
          if (!crl) return sft_loss(logits, mb.input_ids, mb.loss_mask).sum;
          const torch::Tensor logp = next_token_log_probs(logits, mb.input_ids);
          torch::Tensor old = updates > 1 ? old_logp[i] : logp.detach();
          // Off-policy (staleness 1): the ratio is to the policy that generated the rollout, whose
          // log-probs the engine returned; rows no policy wrote (planted) keep the on-policy ratio.
          if (stale) old = torch::where(has_generating_logp[i].unsqueeze(1), generating_logp[i], old);
          return grpo_loss(logp, old, advantages[i], mb.loss_mask, grpo,
                           reference ? std::optional<torch::Tensor>(ref_logp[i]) : std::nullopt).sum;
        });
        if (!stats.skipped) ++policy_version_;
      }
      skipped = stats.skipped || !std::isfinite(stats.loss);
    }
    const double train_seconds = seconds_since(train_start);

    if (is_coordinator()) {
      row.step = step_;
      row.stage = stage_name;
      row.policy_version = current->policy_version;
      row.loss = stats.loss;
      row.grad_norm = stats.grad_norm;
      row.lr = stats.lr;
      row.skipped = skipped;
      row.tokens_generated = static_cast<int64_t>(tokens_generated);
      row.tokens_trained = stats.tokens;
      row.seconds_generate = seconds_generate;
      row.seconds_train = train_seconds;
      row.trainer_wait_seconds = trainer_wait;
      row.restart = restart_;
      row.seconds_step = seconds_since(last_step_end_);
      // Rows before their texts: a process that dies between the two (HDF5 flushes its files at
      // exit) leaves texts of no id beyond the rows, and a restart numbers new rollouts from the rows.
      writer_->append("rollouts", rollout_rows(rollout_rows_out));
      for (const StepText& t : texts) writer_->put_text(t.store, t.id, t.text);
      writer_->append("steps", step_rows({row}));
      writer_->flush();
      last_step_end_ = Clock::now();
      log_step(row, local_step + 1, stage.steps, true);
    }
    ++step_;
    current = std::move(next);  // staleness 1: the step generated meanwhile; else none yet
    const GeneratedStep* in_flight = current ? &*current : nullptr;
    const bool periodic =
        stage.checkpoint.every > 0 && (local_step + 1) % stage.checkpoint.every == 0 && local_step + 1 < stage.steps;
    if (periodic) save_checkpoint(stage, *trainer, index, local_step + 1, false, &normalizer, in_flight);
    if (outcome.contains("evaluation_failed")) {
      // Every trainer has the outcome: they stop together, like a stop signal, with the step's rows
      // and a checkpoint written (the stage's own at its last step), so nothing is lost.
      stop_message_ = outcome["evaluation_failed"].get<std::string>();
      evaluation_failed_ = true;
      watch_->disarm();
      if (local_step + 1 < stage.steps) {
        if (!periodic) save_checkpoint(stage, *trainer, index, local_step + 1, false, &normalizer, in_flight);
        return;
      }
    }
    if (local_step + 1 < stage.steps && stop_agreed(stage_name)) {
      if (!periodic) save_checkpoint(stage, *trainer, index, local_step + 1, false, &normalizer, in_flight);
      return;
    }
    if (!current && local_step + 1 < stage.steps) current = generate_step(stage, make_plan(stage, step_), step_, local_step + 1);
  }
  finish_stage(index, stage, *trainer);
}

}  // namespace

JobOutcome run_job(const JobConfig& job, const RunOptions& options) {
  return Job(job, options).run();
}

}  // namespace crl::rl
