// Batched autoregressive generation with a static KV cache: prompts of different lengths are left
// padded into one batch, prefilled in one pass, then decoded one token per step for every sequence.
//
// On CUDA the decode step (the whole model forward for one token) is captured once into a CUDA
// graph and replayed; sampling runs on the device too, and the host looks at the tokens only every
// `sync_every` steps (to stop early when every sequence is done), so the loop does not wait on the
// GPU step by step. On the CPU the same code runs eagerly.
//
// Stop conditions per sequence: a stop token (eos), a stop string (checked on decoded text when a
// decoder is given), or max_new_tokens. Tokens after a sequence stops are discarded. A stop token is
// kept as the last token. A stop string ends the completion at the token that completes it (kept,
// with its log-probabilities); the text is cut right after the stop string, which it keeps.
#pragma once

#include <torch/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policy/kv_cache.h"
#include "policy/model.h"
#include "policy/sampling.h"

namespace crl::policy {

struct GenerationOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  std::vector<int64_t> stop_token_ids;     // e.g. the config's eos ids
  std::vector<std::string> stop_strings;   // need a decoder
  int64_t pad_token_id = 0;                // fills left padding (masked out; any valid id works)
  bool use_cuda_graph = true;              // CUDA only
  int64_t sync_every = 16;                 // decode steps between host checks for early stop

  void validate() const;
};

enum class FinishReason { kStopToken, kStopString, kLength };
std::string finish_reason_name(FinishReason reason);

struct GeneratedSequence {
  std::vector<int64_t> tokens;         // completion only (no prompt)
  std::vector<float> logprobs;         // per token, under the sampling distribution (sampling.h)
  std::vector<float> model_logprobs;   // per token, log_softmax of the raw logits
  FinishReason finish_reason = FinishReason::kLength;
  std::string text;                    // decoded completion (when a decoder was given)
};

struct GenerationResult {
  std::vector<GeneratedSequence> sequences;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  int64_t decode_steps = 0;
  bool used_cuda_graph = false;
};

// Turns token ids into text; generation uses it for stop strings and GeneratedSequence::text.
using TokenDecoder = std::function<std::string(const std::vector<int64_t>&)>;

// The batch state of one generation: left-padded prompts in a static cache, and the decode step
// (eager, or a replayed CUDA graph). Exposed so tests can drive the cached forward directly.
class BatchedDecoder {
 public:
  // `capacity` slots per sequence: the longest prompt plus the new tokens.
  BatchedDecoder(CausalLm model, const std::vector<std::vector<int64_t>>& prompts, int64_t capacity,
                 int64_t pad_token_id, bool use_cuda_graph);
  ~BatchedDecoder();
  BatchedDecoder(const BatchedDecoder&) = delete;
  BatchedDecoder& operator=(const BatchedDecoder&) = delete;

  // Runs the prompts; returns the logits of each prompt's last token [B, V] (model dtype).
  torch::Tensor prefill();
  // Appends `tokens` [B] (one per sequence, on the model's device) and returns the next logits [B, V].
  // The returned tensor may be a static graph output: read it before the next step.
  torch::Tensor step(const torch::Tensor& tokens);

  int64_t batch() const { return batch_; }
  int64_t prompt_width() const { return width_; }      // columns of the left-padded prompt block
  int64_t next_slot() const { return next_slot_; }     // cache slot the next token goes to
  bool using_cuda_graph() const { return graph_ready_; }

 private:
  torch::Tensor decode_forward(int64_t kv_length);  // reads tokens_, slot_; eager
  void capture_graph();

  CausalLm model_;
  int64_t batch_ = 0, width_ = 0, capacity_ = 0, next_slot_ = 0;
  bool want_graph_ = false, graph_ready_ = false;
  KvCache cache_;
  torch::Tensor prompt_ids_;   // [B, W] left padded
  torch::Tensor pad_counts_;   // [B] int64: left padding per row
  torch::Tensor key_index_;    // [capacity] int64: 0..capacity-1
  torch::Tensor tokens_;       // [B, 1] static input of the decode step
  torch::Tensor slot_;         // [1] int64 static input: the slot being written
  torch::Tensor graph_logits_; // static output of the captured step
  struct Graph;
  std::unique_ptr<Graph> graph_;
};

// Generates a completion for every prompt (token ids). `decode` is needed for stop strings.
GenerationResult generate(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                          const GenerationOptions& options, const TokenDecoder& decode = nullptr);

}  // namespace crl::policy
