// The job file of `crl run` (YAML): what to train, on which tasks, in which stages. Every key is
// validated when the file is read; unknown keys are refused. Keys and defaults: jobs/README.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "program/program_text.h"

namespace crl::rl {

enum class StageKind { kSft, kSelftrain, kCrl };
std::string stage_kind_name(StageKind kind);  // "sft", "selftrain", "crl"

enum class PromptFormat { kChat, kRaw };

struct SamplingConfig {
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  int64_t max_new_tokens = 2048;
};

struct RewardConfig {
  int64_t window = 100;  // rollouts in the running mean and std
  double clip = 1.5;     // normalised rewards are clipped to +-clip
};

struct GrpoConfig {
  double clip = 0.2;       // ratio floor 1 - clip
  double clip_high = 0.28; // ratio ceiling 1 + clip_high
  double kl = 0.0;         // weight of the KL penalty to the initial policy (0: off)
};

struct CheckpointConfig {
  int64_t every = 0;  // optimiser steps between checkpoints (0: only at the end of each stage)
  int64_t keep = 2;   // newest checkpoints kept
  // Minutes (by rank 0's clock) after which the next step boundary writes one (0: never): what a
  // kill that gives no time to stop (a lost node, a launcher's SIGKILL) can cost.
  double every_minutes = 30;
};

// A completion planted in a stage's first step in place of a sampled one, for tests of the job
// (a crashing, hanging or hacking candidate must cost only its own verdict).
struct PlantedCompletion {
  std::string task;
  std::string file;  // a program of the job's program_format (.crl, or .py for kernelbench), wrapped into a completion's fenced block
};

struct StageConfig {
  StageKind kind = StageKind::kCrl;
  int64_t steps = 1;        // selftrain: rounds; crl: steps (batches of tasks)
  int64_t epochs = 1;       // sft: passes over the data
  int64_t batch = 4;        // sft: examples per step; selftrain and crl: tasks per step
  double lr = 1e-5;
  int64_t warmup = 0;       // optimiser steps of linear warm-up
  int64_t updates_per_batch = 1;  // optimiser steps on each batch (crl)
  int64_t group = 16;       // G: completions per prompt
  int64_t exemplars = 2;    // K: exemplars per prompt (crl)
  double tau = 1.0;         // temperature of the bucket softmax
  double bucket_width = 0.25;  // speedup width of an exemplar bucket
  double min_speedup = 0.0;    // selftrain: keep correct programs at least this fast
  SamplingConfig sampling;
  RewardConfig reward;
  GrpoConfig grpo;
  std::string data;         // sft: JSONL of {task, completion} or {task, program}
  CheckpointConfig checkpoint;
  // 0: strictly on-policy (generate, evaluate, train in turn); 1: trainers generate step k+1
  // while the evaluators judge step k (GRPO's ratio then uses the generating policy's log-probs).
  int64_t max_staleness = 0;
  std::vector<PlantedCompletion> planted;
};

struct TaskSelectionConfig {
  std::vector<std::string> ids;
  std::vector<int> levels;
  std::vector<std::string> categories;
};

struct JobEvalConfig {
  std::string scale = "small";
  int trials = 3;
  double time_budget = 2.0;     // seconds of timing per candidate
  double call_timeout = 30.0;   // seconds one correctness trial may take
  // The widest 95% interval (relative half width) a reward may rest on (EvalOptions::max_relative_ci):
  // a measurement wider after its budget is measured on, then internal_error (machine too noisy).
  double max_relative_ci = 0.1;
  bool timing = true;
  // The float32 math allowed: "fp32", or "tf32" (every worker, the reference's timing worker too, may
  // use TF32, so the flag earns no speedup; docs/evaluation.md, "The precision contract").
  std::string precision = "fp32";
  // A program the policy writes again for the same task takes the verdict it had (rank 0 keeps
  // them for the job's run): a policy that has learned a program writes it again and again, and
  // judging each copy anew costs the evaluators and gives equal programs unequal rewards (timing
  // noise) that GRPO would learn from. Verdicts that may depend on the moment (internal errors,
  // timeouts) are judged again.
  bool reuse_verdicts = true;
  // The job stops (checkpointed, with an error) after this many steps in a row in which every
  // judged program got internal_error (0: never).
  int max_failed_steps = 3;
};

// The trainers' generation engine (policy/engine.h), one per trainer for the job's life.
struct GenerationConfig {
  int64_t kv_cache_mib = 0;   // the paged KV pool (0: 1024 on cuda, 64 on cpu)
  int64_t max_running = 256;  // sequences decoded together at most
  int64_t kv_cache_bytes(const std::string& backend) const {
    return (kv_cache_mib > 0 ? kv_cache_mib : backend == "cuda" ? 1024 : 64) << 20;
  }
};

// LoRA instead of full fine-tuning (policy/lora.h): every stage trains the adapters only, and
// generation samples through them.
struct LoraJobConfig {
  bool enabled = false;
  int64_t rank = 16;
  double alpha = 32.0;
  double dropout = 0.0;
  std::vector<std::string> targets{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
};

// Periodic validation on held-out tasks (job key `validation`, jobs/README.md): after every
// `every` steps of a generating stage (selftrain, crl) and after its last, the policy samples G
// completions of each held-out task's prompt (as `crl prompt` shows it: no exemplars) and the
// evaluators judge them; the verdicts go to the results file's /validation table only, never to the
// rewards, the exemplars or an update. A held-out task must not be one of the job's `tasks`.
struct ValidationConfig {
  bool enabled = false;
  TaskSelectionConfig tasks;
  int64_t every = 10;  // a generating stage's steps between validations
  int64_t group = 4;   // G: completions per held-out task
  SamplingConfig sampling;
  std::string where;   // "FILE:LINE" of the `validation.tasks` key, for errors found once the suite is known
};

struct JobConfig {
  std::string path;   // the file it came from
  std::string name;
  uint64_t seed = 0;
  std::string model;  // Hugging Face checkpoint folder
  PromptFormat prompt_format = PromptFormat::kChat;
  std::string backend = "cpu";   // cpu or cuda: trainers and evaluators
  std::string dtype = "fp32";    // trainers' compute dtype
  int trainers = 1;
  // Sequences per micro-batch of a trainer's update, its batch accumulated over micro-batches: it
  // bounds the activations' memory; the update is the same up to rounding (token-level aggregation).
  int64_t micro_batch_size = 4;
  bool share_gpu = false;
  std::string suite;             // suite folder; empty: resolve_suite_dir()'s default
  std::string instructions;      // the prompt's instructions file; empty: the program format's doc
  // The programs the policy writes (job key `program_format`): crl's format, or KernelBench's (a
  // Python ModelNew; the prompt shows the task's KernelBench module from `kernelbench`, a checkout).
  ProgramKind program_format = ProgramKind::crl;
  std::string kernelbench;
  TaskSelectionConfig tasks;
  std::vector<StageConfig> stages;
  JobEvalConfig eval;
  GenerationConfig generation;
  LoraJobConfig lora;
  ValidationConfig validation;
  nlohmann::json as_json;        // the whole file as JSON, for /meta
};

// Reads and validates a job file. Relative paths in it (model, data, suite, instructions,
// planted files) are taken relative to the job file's folder. Throws InputError naming the file,
// the key (e.g. "stages[1].sampling.top_p") and what is wrong.
JobConfig load_job_config(const std::string& path);
// The same from YAML text; `origin` names it in errors and `base_dir` resolves relative paths.
JobConfig parse_job_config(const std::string& text, const std::string& origin, const std::string& base_dir);
// Whether a stage generates (selftrain, crl): the job then needs evaluator ranks beside its trainers.
bool has_generating_stage(const JobConfig& job);

// The keys whose values differ between two job files (their as_json), as the errors name keys:
// "stages[1].lr", "tasks.ids[0]", "eval" (a key present in one of them only). Sorted.
std::vector<std::string> changed_job_keys(const nlohmann::json& before, const nlohmann::json& after);
// Throws InputError naming every changed key (changed_job_keys) that `allowed` does not cover;
// an allowed key covers itself and the keys under it ("stages[1]" covers "stages[1].lr").
// `what` names the two files for the message.
void require_unchanged_job(const nlohmann::json& before, const nlohmann::json& after, const std::vector<std::string>& allowed,
                           const std::string& what);

}  // namespace crl::rl
