// A trainer rank of the job (world ranks 0..T-1), an object that exists on the trainers only: its
// policy (model, tokenizer, chat template, LoRA adapters, the generation engine), its place among
// the trainers (their dist::Group and the gradient communicator), the job's counters, and what the
// trainers do together: run the stages, generate, checkpoint, agree to stop. Rank 0's coordinator
// is reached through it (null on the other trainers).
#pragma once

#include <torch/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/group.h"
#include "dist/mpi_roles.h"
#include "policy/config.h"
#include "policy/engine.h"
#include "policy/lora.h"
#include "policy/model.h"
#include "policy/tokenizer.h"
#include "rl/chat_template.h"
#include "rl/coordinator.h"
#include "rl/job_context.h"
#include "rl/micro_batches.h"
#include "rl/rank_watch.h"
#include "rl/step_batch.h"
#include "rl/train_step.h"

namespace crl::rl {

// Why the job ended early (empty message: it did not).
struct JobStop {
  std::string message;             // "stopped at crl step 7 (SIGUSR1); run the same command to resume"
  bool evaluation_failed = false;  // eval.max_failed_steps: crl's failure, the job exits with an error
};

// Where a checkpoint is taken, and what it keeps beside the weights.
struct CheckpointAt {
  size_t stage_index = 0;
  int64_t stage_steps = 0;  // the stage's steps done
  bool stage_done = false;
  int64_t keep = 2;         // the stage's checkpoint.keep
  bool reward_window = false;                // a generating stage's checkpoint keeps the coordinator's window
  const GeneratedStep* in_flight = nullptr;  // staleness 1: the step generated but not judged
};

class TrainerRank {
 public:
  // Picks the device, makes the gradient communicator, seeds LibTorch's generators, loads the
  // policy (and the LoRA adapters and the generation engine the job needs). Collective over the
  // trainers. `coordinator` on rank 0 only; `watch` outlives this object.
  TrainerRank(const JobContext& context, const dist::MpiRoles& roles, Coordinator* coordinator, RankWatch& watch);

  // Every stage from the resume point on, then the job's end (the weights' check, the evaluators
  // told to stop). Collective over the trainers.
  void run();
  const JobStop& stopped() const { return stop_; }

  // ---- for the stages ----
  const JobContext& context() const { return context_; }
  const JobConfig& job() const { return context_.job; }
  Coordinator* coordinator() { return coordinator_; }
  const dist::Group& trainers() const { return trainers_; }
  dist::Communicator& comm() { return *comm_; }
  torch::Device device() const { return device_; }
  int64_t& job_step() { return job_step_; }            // the job's step counter, over all stages
  int64_t& policy_version() { return policy_version_; }  // optimiser steps so far, over all stages

  std::vector<int64_t> prompt_ids(const std::string& prompt) const;
  std::vector<int64_t> completion_ids(const std::string& completion) const;
  MicroBatchOptions micro_batch_options() const;
  // A Trainer for a stage of `optimiser_steps` steps (its LR schedule). Collective.
  std::unique_ptr<Trainer> make_trainer(const StageConfig& stage, int64_t optimiser_steps);
  // The weights stage `index` started from (the KL reference): the job's model for the first
  // stage, else the checkpoint the stage before it ended with (never pruned), resumed or not.
  // Collective.
  policy::CausalLm stage_start_model(size_t index);
  // This trainer's groups of the plan through the generation engine, planted completions in. No
  // MPI: rank 0 runs it on a second thread beside its dispatch when steps overlap.
  GeneratedStep generate_rollouts(const StageConfig& stage, StepPlan plan, int64_t local_step);
  // This trainer's groups of a validation plan (job key `validation`: its G and sampling), from the
  // policy as it is now. No MPI.
  GeneratedStep generate_validation(StepPlan plan);
  // The prompt token ids of this trainer's groups of the plan (the others' left empty).
  std::vector<std::vector<int64_t>> group_prompts(const StepPlan& plan) const;

  // Rank 0 writes the checkpoint (every trainer's generator states gathered into it), the others
  // wait until its DONE marker is written. Collective.
  void save_checkpoint(Trainer& trainer, const CheckpointAt& at);
  // Whether the step boundary after `steps_done` steps of a stage of `total` writes a periodic
  // checkpoint: every `checkpoint.every` steps, or `checkpoint.every_minutes` after the last one
  // (rank 0's clock decides for all). Never at the stage's last step (its end checkpoint follows).
  // Collective when every_minutes is set.
  bool checkpoint_due(const CheckpointConfig& checkpoint, int64_t steps_done, int64_t total);
  // Ends the stage with its checkpoint, which the next stage starts from. Collective.
  void finish_stage(size_t index, const StageConfig& stage, Trainer& trainer);
  // At a step boundary: whether any rank (a trainer, or an evaluator's note to rank 0) received a
  // stop signal; all trainers agree. Sets stopped(). Collective.
  bool stop_agreed(const std::string& stage_name);
  // Every trainer has the step's outcome: they stop together, like a stop signal.
  void stop_for_failed_evaluation(const std::string& message);

 private:
  void resume_weights_and_counters(size_t* first_stage);
  // This trainer's groups of `plan` (g = rank, rank + T, ...) through the engine in one run, G each,
  // drawn from `seed` (sample keys: the flat index among this trainer's rollouts).
  std::vector<RolloutRecord> sample_groups(const StepPlan& plan, const std::vector<std::vector<int64_t>>& group_prompts,
                                           const SamplingConfig& sampling, int64_t group_size, uint64_t seed);
  std::string weights_sha256();

  const JobContext& context_;
  Coordinator* coordinator_;
  RankWatch& watch_;
  dist::Group trainers_;
  int local_size_ = 1;
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
  int64_t job_step_ = 0;
  int64_t policy_version_ = 0;
  // When the last checkpoint was written (or this rank started): checkpoint.every_minutes' clock.
  std::chrono::steady_clock::time_point last_checkpoint_ = std::chrono::steady_clock::now();
  JobStop stop_;
};

}  // namespace crl::rl
