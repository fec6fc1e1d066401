// A trainer rank: its policy, the stage loop, generation, checkpoints and the stop agreement (trainer_rank.h).
#include "rl/trainer_rank.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>

#include "core/clock.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/process_env.h"
#include "core/read_file.h"
#include "core/seeds.h"
#include "policy/checkpoint.h"
#include "policy/generate.h"
#include "rl/prompt.h"
#include "rl/sft_stage.h"
#include "rl/step_pipeline.h"
#include "rl/stop_request.h"

namespace crl::rl {

namespace fs = std::filesystem;

TrainerRank::TrainerRank(const JobContext& context, const dist::MpiRoles& roles, Coordinator* coordinator, RankWatch& watch)
    : context_(context), coordinator_(coordinator), watch_(watch), trainers_(roles.role_comm), local_size_(roles.local_size) {
  const JobConfig& job = context.job;
  if (job.backend == "cuda") {
    const int count = static_cast<int>(torch::cuda::device_count());
    if (count == 0) throw InputError(fmt::format("{}: backend cuda, but this trainer sees no GPU", job.path));
    device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(dist::gpu_for_local_rank(roles.local_rank, count)));
  } else {
    torch::set_num_threads(core_share(roles.local_size));
  }
  comm_ = dist::make_communicator(roles.role_comm, device_);
  // LibTorch seeds its default generators at random per process; the job's draws (LoRA dropout)
  // must follow the job's seed, so that a run repeats and a resumed run equals an uninterrupted one.
  torch::manual_seed(seeds::torch_seed(job.seed, trainers_.rank()));
  model_config_ = policy::load_model_config(fs::path(job.model) / "config.json");
  model_.emplace(policy::load_causal_lm(job.model, policy::parse_dtype(job.dtype), device_));
  tokenizer_.emplace(policy::Tokenizer::from_file(fs::path(job.model) / "tokenizer.json"));
  if (job.prompt_format == PromptFormat::kChat) chat_.emplace(ChatTemplate::from_model_dir(job.model));
  if (job.lora.enabled) {
    policy::LoraConfig lora;
    lora.rank = job.lora.rank;
    lora.alpha = job.lora.alpha;
    lora.dropout = job.lora.dropout;
    lora.target_modules = job.lora.targets;
    lora.validate();
    // Every trainer draws the same A (the Trainer broadcasts rank 0's adapters anyway).
    lora_ = std::make_unique<policy::LoraAdapters>(*model_, lora, seeds::lora_seed(job.seed));
  }
  if (has_generating_stage(job)) {
    policy::EngineOptions engine;
    engine.kv_cache_bytes = job.generation.kv_cache_bytes(job.backend);
    engine.max_running = job.generation.max_running;
    engine_ = std::make_unique<policy::GenerationEngine>(*model_, engine);
  }
}

// ---- the stage loop ----------------------------------------------------------------------------

void TrainerRank::resume_weights_and_counters(size_t* first_stage) {
  const ResumePoint& resume = *context_.resume;
  if (policy::read_checkpoint_state(resume.dir).lora != (lora_ != nullptr)) {
    throw InputError(fmt::format("{}: the checkpoint {} LoRA adapters, but {} {} the key 'lora'", resume.dir,
                                 lora_ ? "holds no" : "holds", job().path, lora_ ? "has" : "lacks"));
  }
  policy::load_checkpoint_weights(resume.dir, *model_, lora_.get());
  job_step_ = resume.state.job_step;
  policy_version_ = resume.state.policy_version;
  if (coordinator_ != nullptr) {
    coordinator_->set_stage_start_dir(resume.state.stage_done           ? resume.dir
                                      : resume.state.stage_start.empty() ? std::string()
                                                                         : (context_.checkpoint_root() / resume.state.stage_start).string());
  }
  *first_stage = resume.state.stage + (resume.state.stage_done ? 1 : 0);
  // A stage's end: its successor starts from these generator states (mid-stage: after the
  // stage's trainer is made, where the uninterrupted run stood).
  if (resume.state.stage_done) policy::load_checkpoint_generators(resume.dir, trainers_.rank());
  if (coordinator_ != nullptr && *first_stage == job().stages.size()) spdlog::info("the job was already complete");
}

void TrainerRank::run() {
  const JobConfig& job = context_.job;
  if (coordinator_ != nullptr) coordinator_->start_training();
  size_t first_stage = 0;
  if (context_.resume) resume_weights_and_counters(&first_stage);
  for (size_t i = first_stage; i < job.stages.size() && stop_.message.empty(); ++i) {
    const StageConfig& stage = job.stages[i];
    if (coordinator_ != nullptr) spdlog::info("stage {} of {}: {}", i + 1, job.stages.size(), stage_kind_name(stage.kind));
    if (stage.kind == StageKind::kSft) {
      run_sft_stage(*this, i, stage);
    } else {
      run_generating_stage(*this, i, stage);
    }
    // After the job's last stage too: a stop that arrived while its final checkpoint was written
    // ends the job stopped (exit 5, the stop logged); the same command then finds it complete.
    if (stop_.message.empty()) stop_agreed(stage_kind_name(stage.kind));
  }
  if (!stop_.message.empty()) {
    if (coordinator_ != nullptr) coordinator_->stop({stop_.message, stop_.evaluation_failed});
    return;
  }
  watch_.disarm();  // from here ranks leave as they finish
  // The trainers' weights must be equal: the data-parallel invariant, checked once at the end.
  const std::vector<std::string> hashes = trainers_.gather(weights_sha256(), 0, "a trainer's weight hash");
  if (coordinator_ != nullptr) coordinator_->finish(hashes);
}

std::string TrainerRank::weights_sha256() {
  Sha256 hash;
  const auto add = [&](const std::string& name, const torch::Tensor& tensor) {
    const torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    hash.field(name);
    hash.field(std::string_view(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.nbytes())));
  };
  for (const auto& [name, tensor] : policy::state_tensors(*model_)) add(name, tensor);
  if (lora_) {
    for (const auto& [name, tensor] : lora_->named_parameters()) add(name, tensor);
  }
  return hash.hex();
}

// ---- the policy's side -------------------------------------------------------------------------

std::vector<int64_t> TrainerRank::prompt_ids(const std::string& prompt) const {
  return policy_prompt_ids(*tokenizer_, chat_ ? &*chat_ : nullptr, prompt);
}

std::vector<int64_t> TrainerRank::completion_ids(const std::string& completion) const {
  const std::vector<int32_t> ids = tokenizer_->encode(completion, false, false);
  std::vector<int64_t> out(ids.begin(), ids.end());
  if (!model_config_->eos_token_ids.empty()) out.push_back(model_config_->eos_token_ids[0]);
  return out;
}

MicroBatchOptions TrainerRank::micro_batch_options() const {
  MicroBatchOptions options;
  options.size = static_cast<size_t>(job().micro_batch_size);
  options.pad_token_id = model_config_->pad_token_id.value_or(model_config_->eos_token_ids.empty() ? 0 : model_config_->eos_token_ids[0]);
  options.device = device_;
  return options;
}

std::unique_ptr<Trainer> TrainerRank::make_trainer(const StageConfig& stage, int64_t optimiser_steps) {
  TrainerOptions options;
  options.schedule = LrSchedule{stage.lr, std::min(stage.warmup, optimiser_steps), std::max<int64_t>(1, optimiser_steps), 0.1};
  return std::make_unique<Trainer>(*model_, options, *comm_, lora_.get());
}

policy::CausalLm TrainerRank::stage_start_model(size_t index) {
  std::string dir = job().model;
  if (index > 0) {
    if (coordinator_ != nullptr && !coordinator_->stage_start_dir().empty()) {
      dir = coordinator_->stage_start_dir();
    } else if (coordinator_ != nullptr) {  // a checkpoint that did not record it: the newest end of the stage before
      dir = stage_end_checkpoint(context_.checkpoint_root(), index - 1);
      if (dir.empty()) {
        throw InputError(fmt::format("{}: no checkpoint of the end of stage {}, which stage {}'s KL reference is; was it deleted?",
                                     context_.checkpoint_root().string(), index, index + 1));
      }
    }
    trainers_.broadcast_text(dir, 0);
  }
  if (coordinator_ != nullptr) spdlog::info("stage {}: KL reference: the weights it started from, {}", index + 1, dir);
  return policy::load_causal_lm(dir, policy::parse_dtype(job().dtype), device_);
}

std::vector<std::vector<int64_t>> TrainerRank::group_prompts(const StepPlan& plan) const {
  const int64_t groups = static_cast<int64_t>(plan.groups.size());
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(groups));
  for (int64_t g = trainers_.rank(); g < groups; g += trainers_.size()) {
    out[static_cast<size_t>(g)] = prompt_ids(plan.groups[static_cast<size_t>(g)].prompt);
  }
  return out;
}

// ---- checkpoints and stops ---------------------------------------------------------------------

void TrainerRank::save_checkpoint(Trainer& trainer, const CheckpointAt& at) {
  const std::vector<std::string> states = trainers_.gather_texts(generator_states_cbor(policy::generator_states()), 0);
  // Every trainer alike has a step in flight or none (the same control flow).
  const std::vector<std::string> in_flight_shares =
      at.in_flight ? trainers_.gather_texts(in_flight_share_text(*at.in_flight), 0) : std::vector<std::string>();
  if (coordinator_ != nullptr) {
    policy::CheckpointContents contents;
    contents.model = &*model_;
    contents.lora = lora_.get();  // LoRA: the PEFT adapter (in adapter/) beside the merged model
    contents.base_model = job().model;
    contents.tokenizer_from = job().model;  // transformers and crl generate load the checkpoint whole
    contents.optimizer = &trainer.optimizer();
    contents.schedule = trainer.options().schedule.to_json();
    contents.step = job_step_;
    for (size_t r = 0; r < states.size(); ++r) {
      contents.rank_generator_states.push_back(generator_states_from_cbor(states[r], static_cast<int>(r)));
    }
    RunState state;
    state.stage = at.stage_index;
    state.stage_steps = at.stage_steps;
    state.stage_done = at.stage_done;
    state.job_step = job_step_;
    state.policy_version = policy_version_;
    if (at.reward_window) state.normalizer = coordinator_->reward_window();
    if (at.in_flight) {
      state.in_flight = InFlightStep{at.in_flight->plan.job_step, at.in_flight->local_step, at.in_flight->plan.groups, in_flight_shares};
    }
    coordinator_->write_checkpoint(std::move(contents), std::move(state), at.keep);
  }
  trainers_.barrier();  // every trainer agrees the checkpoint is complete
  last_checkpoint_ = std::chrono::steady_clock::now();
}

bool TrainerRank::checkpoint_due(const CheckpointConfig& checkpoint, int64_t steps_done, int64_t total) {
  if (steps_done >= total) return false;
  const bool by_steps = checkpoint.every > 0 && steps_done % checkpoint.every == 0;
  if (checkpoint.every_minutes <= 0) return by_steps;
  const double minutes = seconds_since(last_checkpoint_) / 60.0;
  const bool by_time = coordinator_ != nullptr && minutes >= checkpoint.every_minutes;
  if (by_time && !by_steps) spdlog::info("{:.1f} minutes since the last checkpoint: writing one (checkpoint.every_minutes)", minutes);
  return trainers_.broadcast(by_steps || by_time, 0, "whether a checkpoint is due");
}

void TrainerRank::finish_stage(size_t index, const StageConfig& stage, Trainer& trainer) {
  save_checkpoint(trainer, {index, 0, true, stage.checkpoint.keep, false, nullptr});
  if (coordinator_ != nullptr) coordinator_->set_stage_start_dir(coordinator_->last_checkpoint());  // the next stage starts from it
}

bool TrainerRank::stop_agreed(const std::string& stage_name) {
  int mine = stop_signal();
  if (coordinator_ != nullptr && mine == 0) mine = coordinator_->take_stop_signal();
  if (comm_->all_reduce_scalar(mine != 0 ? 1.0 : 0.0) == 0) return false;
  // Which signal, for the message: rank 0's, else the first trainer's that has one.
  const std::vector<int> signals = trainers_.gather(mine, 0, "a trainer's stop signal");
  std::string message;
  if (coordinator_ != nullptr) {
    int signal = 0;
    for (int s : signals) {
      if (signal == 0) signal = s;
    }
    message = fmt::format("stopped at {} step {} ({}); run the same command to resume", stage_name, job_step_ - 1, signal_name(signal));
  }
  stop_.message = trainers_.broadcast(message, 0, "the stop message");
  watch_.disarm();  // the ranks leave once the checkpoint is written
  return true;
}

void TrainerRank::stop_for_failed_evaluation(const std::string& message) {
  stop_ = {message, true};
  watch_.disarm();
}

// ---- generation --------------------------------------------------------------------------------

namespace {

// Planted completions (tests): in the stage's first step, in place of the first samples of the
// first group of their task. No policy wrote them: they have no generating log-probs.
void plant_completions(const StageConfig& stage, ProgramKind kind, const StepPlan& plan, const TrainerRank& rank,
                       std::vector<RolloutRecord>& mine) {
  const int64_t groups = static_cast<int64_t>(plan.groups.size());
  const int trainer = rank.trainers().rank(), trainers = rank.trainers().size();
  std::map<int64_t, int64_t> used;
  for (const PlantedCompletion& p : stage.planted) {
    int64_t g = 0;
    while (g < groups && plan.groups[static_cast<size_t>(g)].task != p.task) ++g;
    if (g == groups) {
      if (trainer == 0) spdlog::warn("planted completion {}: task {} is not in the first step's batch", p.file, p.task);
      continue;
    }
    const int64_t s = used[g]++;
    if (s >= stage.group || g % trainers != trainer) continue;
    for (RolloutRecord& r : mine) {
      if (r.group == g && r.sample == s) {
        r.completion = completion_from_program(read_input_file(p.file, "planted completion"), kind);
        r.tokens = rank.completion_ids(r.completion);
        r.completion_tokens = static_cast<int64_t>(r.tokens.size());
        r.logp.clear();
      }
    }
  }
}

}  // namespace

std::vector<RolloutRecord> TrainerRank::sample_groups(const StepPlan& plan, const std::vector<std::vector<int64_t>>& group_prompts,
                                                      const SamplingConfig& sampling, int64_t group_size, uint64_t seed) {
  const int64_t groups = static_cast<int64_t>(plan.groups.size());
  // All of this trainer's groups (g = rank, rank + T, ...) in one engine run: each prompt is
  // prefilled once for its G samples. Sample keys are the flat index among this trainer's rollouts.
  std::vector<policy::GenerationRequest> requests;
  std::vector<int64_t> request_group;
  const int64_t block_size = policy::EngineOptions{}.block_size;
  for (int64_t g = trainers_.rank(); g < groups; g += trainers_.size()) {
    const std::vector<int64_t>& prompt = group_prompts[static_cast<size_t>(g)];
    const auto need = policy::GenerationEngine::block_need(static_cast<int64_t>(prompt.size()), sampling.max_new_tokens, block_size);
    if (need.prompt_blocks + need.own_blocks > engine_->usable_blocks()) {
      throw InputError(fmt::format("{}: a prompt of {} tokens with sampling.max_new_tokens {} needs {} KV cache blocks, but "
                                   "generation.kv_cache_mib holds {}: raise generation.kv_cache_mib (or lower max_new_tokens)",
                                   job().path, prompt.size(), sampling.max_new_tokens, need.prompt_blocks + need.own_blocks,
                                   engine_->usable_blocks()));
    }
    requests.push_back({prompt, group_size, static_cast<int64_t>(request_group.size()) * group_size, std::nullopt});
    request_group.push_back(g);
  }
  std::vector<RolloutRecord> mine;
  if (requests.empty()) return mine;
  policy::GenerationOptions gen;
  gen.max_new_tokens = sampling.max_new_tokens;
  gen.sampling = {sampling.temperature, sampling.top_p, sampling.top_k, seed};
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
      RolloutRecord r;
      r.group = g;
      r.sample = s;
      r.tokens = std::move(seq.tokens);
      r.completion_tokens = static_cast<int64_t>(r.tokens.size());
      r.completion = std::move(seq.text);
      r.logp = std::move(seq.model_logprobs);
      mine.push_back(std::move(r));
    }
  }
  return mine;
}

GeneratedStep TrainerRank::generate_rollouts(const StageConfig& stage, StepPlan plan, int64_t local_step) {
  const auto start = std::chrono::steady_clock::now();
  GeneratedStep out;
  out.local_step = local_step;
  out.policy_version = policy_version_;
  out.plan = std::move(plan);
  out.group_prompts = group_prompts(out.plan);
  out.mine = sample_groups(out.plan, out.group_prompts, stage.sampling, stage.group,
                           seeds::sampling_seed(job().seed, out.plan.job_step, trainers_.rank()));
  if (local_step == 0) plant_completions(stage, context_.job.program_format, out.plan, *this, out.mine);
  out.seconds = seconds_since(start);
  out.finished = std::chrono::steady_clock::now();
  return out;
}

GeneratedStep TrainerRank::generate_validation(StepPlan plan) {
  const auto start = std::chrono::steady_clock::now();
  const ValidationConfig& validation = job().validation;
  GeneratedStep out;
  out.local_step = -1;
  out.policy_version = policy_version_;
  out.plan = std::move(plan);
  out.group_prompts = group_prompts(out.plan);
  out.mine = sample_groups(out.plan, out.group_prompts, validation.sampling, validation.group,
                           seeds::validation_sampling_seed(job().seed, out.plan.job_step, trainers_.rank()));
  out.seconds = seconds_since(start);
  out.finished = std::chrono::steady_clock::now();
  return out;
}

}  // namespace crl::rl
