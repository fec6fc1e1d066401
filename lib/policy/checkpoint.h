// Training checkpoints: a directory per step under a root, written whole or not at all.
//
//   ROOT/step-00000042/
//     config.json, model.safetensors       Hugging Face model (full fine-tuning, or LoRA merged)
//     adapter/adapter_config.json,         LoRA only: PEFT adapter (PEFT tensor names), in a folder
//     adapter/adapter_model.safetensors    of its own: transformers loads ROOT/step-N as the merged
//                                          model, peft loads ROOT/step-N/adapter onto the base
//     optimizer.safetensors                AdamW fp32 masters and moments, step
//     rng.safetensors                      CPU (and CUDA) generator states: this process's
//                                          ("cpu", "cuda:0"), or every rank's ("rank1.cpu")
//     trainer_state.json                   step, schedule, LoRA settings, user data
//     tokenizer.json, tokenizer_config.json, the tokenizer and generation files of the model
//     generation_config.json, ...          folder the job started from, copied as they are, so
//                                          that Hugging Face tools (AutoTokenizer, AutoModel...)
//                                          and `crl generate` load the folder whole
//     DONE                                 SHA-256 of every file above; written last
//
// Everything is written into ROOT/.tmp-step-00000042, then DONE, then the directory is renamed
// into place (atomic on one file system). Resuming takes the newest step directory whose DONE
// exists and whose files all match their hashes; a checkpoint that fails is reported (naming the
// file and what is wrong) and the one before it is tried.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "policy/lora.h"
#include "policy/model.h"
#include "policy/optimizer_state.h"
#include "policy/safetensors.h"

namespace crl::policy {

struct CheckpointContents {
  const CausalLm* model = nullptr;         // required
  const LoraAdapters* lora = nullptr;      // null: full fine-tuning
  bool lora_write_merged_model = true;     // LoRA: also write the merged model.safetensors
  std::string base_model;                  // LoRA: recorded in adapter_config.json
  // The model folder whose tokenizer and generation files (tokenizer_files() that it holds) go
  // into the checkpoint; empty: none.
  std::filesystem::path tokenizer_from;
  const OptimizerState* optimizer = nullptr;  // required (rl::MasterAdamW)
  nlohmann::json schedule = nlohmann::json::object();  // the LR schedule (rl::LrSchedule::to_json())
  int64_t step = 0;
  nlohmann::json user_state = nlohmann::json::object();  // the caller's own (data position, ...)
  // A data-parallel job's generator states, rank r's at index r (each rank's generator_states(),
  // gathered by the writing rank); empty: this process's own.
  std::vector<NamedTensors> rank_generator_states;
};

// The files of a Hugging Face model folder that make its tokenizer, chat template and generation
// settings (tokenizer.json, tokenizer_config.json, special_tokens_map.json, vocab.json, merges.txt,
// tokenizer.model, chat_template.jinja, generation_config.json, ...): what a checkpoint copies from
// CheckpointContents::tokenizer_from.
const std::vector<std::string>& tokenizer_files();

// This process's generator states (CPU, and each CUDA device's), as a checkpoint saves them.
NamedTensors generator_states();

// Writes ROOT/step-<step>; returns its path. Throws IoError (naming the file) on failure and
// leaves no partial step directory behind (at most a .tmp- directory, removed next time).
std::filesystem::path save_checkpoint(const std::filesystem::path& root, const CheckpointContents& contents);

struct CheckpointCheck {
  std::filesystem::path dir;
  bool ok = false;
  std::string problem;  // why not, naming the file
};

// Step directories under ROOT, newest first, each checked (DONE present, hashes match).
std::vector<CheckpointCheck> check_checkpoints(const std::filesystem::path& root);

// The newest checkpoint under ROOT that passes its check, checking the newest first and no
// further than needed; each newer one that fails is logged as a warning naming the file and
// listed in `skipped` (when given). Nullopt when none passes.
std::optional<std::filesystem::path> find_latest_checkpoint(const std::filesystem::path& root,
                                                            std::vector<std::string>* skipped = nullptr);

// What trainer_state.json of a checkpoint holds (InputError naming the file when it is not valid).
struct CheckpointState {
  int64_t step = 0;
  nlohmann::json schedule;
  bool lora = false;
  nlohmann::json user_state;
};
CheckpointState read_checkpoint_state(const std::filesystem::path& dir);
// Read-back of one part of a checked checkpoint (find_latest_checkpoint): the weights (full
// fine-tuning: model.safetensors into `model`; LoRA: the adapters), the optimiser state, and
// the generator states, those of `rank` when the checkpoint holds every rank's (else its own).
// Each throws InputError naming the file when it does not fit.
void load_checkpoint_weights(const std::filesystem::path& dir, CausalLm& model, LoraAdapters* lora);
void load_checkpoint_optimizer(const std::filesystem::path& dir, OptimizerState& optimizer);
void load_checkpoint_generators(const std::filesystem::path& dir, int rank);

}  // namespace crl::policy
