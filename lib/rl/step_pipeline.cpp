// A generating stage's steps: run_step, run_step_overlapped and the MPI-bound stages between the
// trainers and rank 0 (step_pipeline.h).
#include "rl/step_pipeline.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <future>
#include <optional>

#include "core/clock.h"
#include "policy/checkpoint.h"
#include "rl/losses.h"
#include "rl/micro_batches.h"
#include "rl/token_log_probs.h"

#if CRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace crl::rl {
namespace {

using Clock = std::chrono::steady_clock;

// A step's rollouts gathered: rank 0's batch (empty elsewhere), and when this trainer began to wait.
struct Collected {
  StepBatch batch;
  Clock::time_point wait_start;
};

// The update's telemetry (entropy, KL, clipped tokens) summed over its micro-batches as device
// scalars, so the step still reads nothing mid-way; read once after the update and summed over the
// trainers. Every trainer calls read_into (all-reduces).
class TelemetrySums {
 public:
  void add_entropy(const torch::Tensor& sum) { entropy_ = entropy_.defined() ? entropy_ + sum : sum; }
  void add_grpo(const LossSum& loss) {
    kl_ = kl_.defined() ? kl_ + loss.kl_sum : loss.kl_sum;
    clipped_ = clipped_.defined() ? clipped_ + loss.clipped_tokens : loss.clipped_tokens;
  }
  // Means per loss token over all trainers (`tokens`); KL only `with_kl` (a reference exists),
  // clip fraction only `with_clip` (the loss clips).
  void read_into(UpdateStats& update, dist::Communicator& comm, double tokens, bool with_clip, bool with_kl) const {
    const auto local = [](const torch::Tensor& t) { return t.defined() ? t.to(torch::kFloat64).cpu().item<double>() : 0.0; };
    const double entropy = comm.all_reduce_scalar(local(entropy_));
    const double kl = comm.all_reduce_scalar(local(kl_));
    const double clipped = comm.all_reduce_scalar(local(clipped_));
    if (tokens <= 0) return;
    update.entropy = entropy / tokens;
    if (with_kl) update.kl = kl / tokens;
    if (with_clip) update.clip_fraction = clipped / tokens;
  }

 private:
  torch::Tensor entropy_, kl_, clipped_;
};

class GeneratingStage {
 public:
  GeneratingStage(TrainerRank& rank, size_t index, const StageConfig& stage);
  void run();

 private:
  // The step's plan (rank 0's plan_step, broadcast) and this trainer's rollouts of it.
  StepPlan share_plan(int64_t job_step);
  GeneratedStep generate(int64_t local_step);
  // Staleness 1: the next step generated while this one is judged (on rank 0 on a second thread,
  // beside its dispatch).
  GeneratedStep generate_next(const StepPlan& plan, int64_t local_step);
  std::optional<GeneratedStep> resume_in_flight(const ResumePoint& resume);

  StepOutcome run_step(GeneratedStep& current);
  StepOutcome run_step_overlapped(GeneratedStep& current, std::optional<GeneratedStep>& next);

  Collected collect(const GeneratedStep& current);
  // Held-out validation (job key `validation`) after `steps_done` of the stage's steps, when due:
  // every `every` steps and after the stage's last. Every trainer samples its share of the held-out
  // tasks from the policy as it is now; rank 0 judges and records them. No update follows.
  void validate_if_due(int64_t steps_done);
  // Rank 0's judged outcome (its argument) to every trainer.
  StepOutcome share(const StepOutcome& outcome);
  UpdateStats update_policy(const GeneratedStep& current, const StepOutcome& outcome);
  // The wait, the update and rank 0's record: the end of either kind of step.
  void update_and_record(const GeneratedStep& current, Collected& collected, const StepOutcome& outcome);
  // Checkpoints and stops at the boundary after `local_step`; true: the stage (and job) stops here.
  bool stops_after(int64_t local_step, const GeneratedStep* in_flight, const StepOutcome& outcome);

  TrainerRank& rank_;
  Coordinator* coordinator_;  // rank 0 only
  size_t index_;
  const StageConfig& stage_;
  const std::string stage_name_;
  const bool crl_;
  const bool stale_;       // max_staleness 1: rollouts may come from the policy before the last update
  const int64_t updates_;  // optimiser steps per batch
  std::unique_ptr<Trainer> trainer_;
  std::optional<policy::CausalLm> reference_;  // the policy the stage started from, for the KL penalty
};

GeneratingStage::GeneratingStage(TrainerRank& rank, size_t index, const StageConfig& stage)
    : rank_(rank),
      coordinator_(rank.coordinator()),
      index_(index),
      stage_(stage),
      stage_name_(stage_kind_name(stage.kind)),
      crl_(stage.kind == StageKind::kCrl),
      stale_(stage.max_staleness > 0),
      updates_(crl_ ? stage.updates_per_batch : 1) {
  trainer_ = rank.make_trainer(stage, stage.steps * updates_);
  if (crl_ && stage.grpo.kl > 0) reference_.emplace(rank.stage_start_model(index));
}

StepPlan GeneratingStage::share_plan(int64_t job_step) {
  StepPlan plan;
  if (coordinator_ != nullptr) plan = coordinator_->plan_step(stage_, job_step);
  return {job_step, rank_.trainers().broadcast(plan.groups, 0, "the step's plan")};
}

GeneratedStep GeneratingStage::generate(int64_t local_step) {
  return rank_.generate_rollouts(stage_, share_plan(rank_.job_step()), local_step);
}

GeneratedStep GeneratingStage::generate_next(const StepPlan& plan, int64_t local_step) {
#if CRL_HAVE_CUDA
  // A new thread starts on device 0: the trainer's device is set (again) on this one.
  if (rank_.device().is_cuda()) {
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) cudaSetDevice(rank_.device().index());
  }
#endif
  return rank_.generate_rollouts(stage_, plan, local_step);
}

// Staleness 1: the checkpoint holds the step that was generated (by the policy before the last
// update) while the last step was judged; it is judged now, not generated again.
std::optional<GeneratedStep> GeneratingStage::resume_in_flight(const ResumePoint& resume) {
  if (resume.in_flight.is_null()) return std::nullopt;
  GeneratedStep step = in_flight_share(resume, stage_, rank_.trainers().rank(), rank_.trainers().size());
  step.group_prompts = rank_.group_prompts(step.plan);
  if (coordinator_ != nullptr) {
    spdlog::info("{} step {} generated before the checkpoint (by policy version {}) is judged now, not generated again",
                 stage_name_, step.plan.job_step, step.policy_version);
  }
  return step;
}

void GeneratingStage::run() {
  int64_t first = 0;
  std::optional<GeneratedStep> current;  // the step whose rollouts are generated and not yet judged
  const ResumePoint* resume = rank_.context().resuming_stage(index_);
  if (coordinator_ != nullptr) coordinator_->begin_generating_stage(stage_, resume);
  if (resume != nullptr) {
    first = resume->state.stage_steps;
    policy::load_checkpoint_optimizer(resume->dir, trainer_->optimizer());
    policy::load_checkpoint_generators(resume->dir, rank_.trainers().rank());
    current = resume_in_flight(*resume);
  }
  if (coordinator_ != nullptr) coordinator_->start_stage_clock(first);
  if (!current && first < stage_.steps) current = generate(first);
  for (int64_t local_step = first; local_step < stage_.steps; ++local_step) {
    // Staleness 1 overlaps every step but the stage's last with the generation of the next.
    std::optional<GeneratedStep> next;
    const StepOutcome outcome =
        stale_ && local_step + 1 < stage_.steps ? run_step_overlapped(*current, next) : run_step(*current);
    ++rank_.job_step();
    current = std::move(next);
    validate_if_due(local_step + 1);
    if (stops_after(local_step, current ? &*current : nullptr, outcome)) return;
    if (!current && local_step + 1 < stage_.steps) current = generate(local_step + 1);
  }
  rank_.finish_stage(index_, stage_, *trainer_);
}

StepOutcome GeneratingStage::run_step(GeneratedStep& current) {
  Collected collected = collect(current);
  const StepOutcome outcome = share(coordinator_ != nullptr ? coordinator_->judge(collected.batch, stage_) : StepOutcome{});
  update_and_record(current, collected, outcome);
  return outcome;
}

StepOutcome GeneratingStage::run_step_overlapped(GeneratedStep& current, std::optional<GeneratedStep>& next) {
  Collected collected = collect(current);
  // The next step's plan, from the exemplars known before this step's verdicts.
  const StepPlan next_plan = share_plan(rank_.job_step() + 1);
  StepOutcome judged;
  if (coordinator_ != nullptr) {
    // Rank 0 dispatches on this thread (every MPI call stays here) while its own share of the next
    // step is generated on another (no MPI there; torch only).
    std::future<GeneratedStep> pending =
        std::async(std::launch::async, [&] { return generate_next(next_plan, current.local_step + 1); });
    judged = coordinator_->judge(collected.batch, stage_);
    next = pending.get();
  } else {
    next = generate_next(next_plan, current.local_step + 1);
  }
  collected.wait_start = next->finished;  // the trainers wait for the verdicts only once the next step is generated
  const StepOutcome outcome = share(judged);
  update_and_record(current, collected, outcome);
  return outcome;
}

// This trainer's rollouts as rank 0 receives them.
std::vector<CompletionMessage> completion_messages(const GeneratedStep& step) {
  std::vector<CompletionMessage> mine;
  for (const RolloutRecord& r : step.mine) mine.push_back({r.group, r.sample, r.completion, static_cast<int64_t>(r.tokens.size())});
  return mine;
}

void GeneratingStage::validate_if_due(int64_t steps_done) {
  const ValidationConfig& validation = rank_.job().validation;
  if (!validation.enabled || (steps_done % validation.every != 0 && steps_done != stage_.steps)) return;
  const JobContext& context = rank_.context();
  // Labelled with the step just trained: a checkpoint after it covers these rows.
  const StepPlan plan = plan_validation(context.validation_tasks, rank_.job_step() - 1,
                                        [&](const Task& task, const std::vector<PromptExemplar>& shown) { return context.render_prompt(task, shown); });
  const GeneratedStep generated = rank_.generate_validation(plan);
  const auto per_trainer = rank_.trainers().gather(completion_messages(generated), 0, "a trainer's validation completions");
  if (coordinator_ != nullptr) coordinator_->validate(generated.plan, generated.policy_version, per_trainer, stage_name_);
}

Collected GeneratingStage::collect(const GeneratedStep& current) {
  int64_t my_tokens = 0;
  for (const RolloutRecord& r : current.mine) my_tokens += static_cast<int64_t>(r.tokens.size());
  const std::vector<CompletionMessage> mine = completion_messages(current);
  const double tokens_generated = rank_.comm().all_reduce_scalar(static_cast<double>(my_tokens));
  const double seconds_generate = rank_.comm().all_reduce_scalar(current.seconds) / rank_.trainers().size();
  Collected out;
  out.wait_start = Clock::now();
  const auto per_trainer = rank_.trainers().gather(mine, 0, "a trainer's completions");
  if (coordinator_ != nullptr) {
    out.batch = coordinator_->batch_of(current.plan, stage_.group, current.policy_version, per_trainer);
    out.batch.timings.tokens_generated = tokens_generated;
    out.batch.timings.seconds_generate = seconds_generate;
  }
  return out;
}

StepOutcome GeneratingStage::share(const StepOutcome& outcome) {
  return rank_.trainers().broadcast(outcome, 0, "the step's outcome");
}

void GeneratingStage::update_and_record(const GeneratedStep& current, Collected& collected, const StepOutcome& outcome) {
  const double trainer_wait = rank_.comm().all_reduce_scalar(seconds_since(collected.wait_start));
  const auto train_start = Clock::now();
  const UpdateStats update = update_policy(current, outcome);
  collected.batch.timings.seconds_train = seconds_since(train_start);
  collected.batch.timings.trainer_wait_seconds = trainer_wait;
  if (coordinator_ != nullptr) {
    coordinator_->record_step(collected.batch, update, stage_name_, current.local_step + 1, stage_.steps);
  }
}

UpdateStats GeneratingStage::update_policy(const GeneratedStep& current, const StepOutcome& outcome) {
  if (outcome.train_rollouts == 0) return {};
  std::vector<Sequence> sequences;
  for (const RolloutRecord& r : current.mine) {
    const size_t i = static_cast<size_t>(r.group * stage_.group + r.sample);
    sequences.push_back({&current.group_prompts[static_cast<size_t>(r.group)], &r.tokens, outcome.train.at(i),
                         outcome.advantages.at(i), r.logp.empty() ? nullptr : &r.logp});
  }
  static const std::vector<int64_t> kDummy = {0, 0};
  if (sequences.empty()) sequences.push_back({&kDummy, &kDummy, false, 0, nullptr});  // more trainers than groups
  const MicroBatches packed = micro_batches(sequences, rank_.micro_batch_options());
  const std::vector<MicroBatch>& batches = packed.batches;
  std::vector<torch::Tensor> old_logp, ref_logp;
  if (crl_ && (updates_ > 1 || reference_)) {
    torch::NoGradGuard no_grad;
    for (const auto& mb : batches) {
      if (updates_ > 1) old_logp.push_back(next_token_log_probs(trainer_->forward(mb), mb.input_ids).detach());
      if (reference_) ref_logp.push_back(next_token_log_probs((*reference_)->forward(mb.input_ids), mb.input_ids));
    }
  }
  const GrpoOptions grpo{stage_.grpo.clip, stage_.grpo.clip_high, stage_.grpo.kl};
  StepStats stats;
  TelemetrySums sums;
  for (int64_t u = 0; u < updates_; ++u) {
    sums = TelemetrySums{};  // the last update's figures, as its loss
    stats = trainer_->step(batches, [&](const torch::Tensor& logits, size_t i) {
      const auto& mb = batches[i];
      sums.add_entropy(token_entropy_sum(logits, mb.loss_mask).sum);
      if (!crl_) return sft_loss(logits, mb.input_ids, mb.loss_mask).sum;
      const torch::Tensor logp = next_token_log_probs(logits, mb.input_ids);
      torch::Tensor old = updates_ > 1 ? old_logp[i] : logp.detach();
      // Off-policy (staleness 1): the ratio is to the policy that generated the rollout, whose
      // log-probs the engine returned; rows no policy wrote (planted) keep the on-policy ratio.
      if (stale_) old = torch::where(packed.has_generating_logp[i].unsqueeze(1), packed.generating_logp[i], old);
      const LossSum loss = grpo_loss(logp, old, packed.advantages[i], mb.loss_mask, grpo,
                                     reference_ ? std::optional<torch::Tensor>(ref_logp[i]) : std::nullopt);
      sums.add_grpo(loss);
      return loss.sum;
    });
    if (!stats.skipped) ++rank_.policy_version();
  }
  UpdateStats update{stats.loss, stats.grad_norm, stats.lr, stats.tokens, stats.skipped || !std::isfinite(stats.loss)};
  sums.read_into(update, rank_.comm(), static_cast<double>(stats.tokens), crl_, crl_ && reference_.has_value());
  return update;
}

bool GeneratingStage::stops_after(int64_t local_step, const GeneratedStep* in_flight, const StepOutcome& outcome) {
  const bool last = local_step + 1 >= stage_.steps;
  const CheckpointAt here{index_, local_step + 1, false, stage_.checkpoint.keep, true, in_flight};
  const bool periodic = rank_.checkpoint_due(stage_.checkpoint, local_step + 1, stage_.steps);
  if (periodic) rank_.save_checkpoint(*trainer_, here);
  if (!outcome.evaluation_failed.empty()) {
    // Every trainer has the outcome: they stop together, like a stop signal, with the step's rows
    // and a checkpoint written (the stage's own at its last step), so nothing is lost.
    rank_.stop_for_failed_evaluation(outcome.evaluation_failed);
    if (!last) {
      if (!periodic) rank_.save_checkpoint(*trainer_, here);
      return true;
    }
  }
  if (!last && rank_.stop_agreed(stage_name_)) {
    if (!periodic) rank_.save_checkpoint(*trainer_, here);
    return true;
  }
  return false;
}

}  // namespace

void run_generating_stage(TrainerRank& rank, size_t index, const StageConfig& stage) { GeneratingStage(rank, index, stage).run(); }

}  // namespace crl::rl
