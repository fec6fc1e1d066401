// Autoregressive generation: the options, results and stop rules every generation path shares, and
// generate(), a one-call front end of the continuous-batching engine (engine.h).
//
// Stop conditions per sequence: a stop token (eos), a stop string (checked on decoded text when a
// decoder is given), or max_new_tokens. A stop token is kept as the last token. A stop string ends
// the completion at the token that completes it (kept, with its log-probabilities); the text is cut
// right after the stop string, which it keeps.
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "policy/model.h"
#include "policy/sampling.h"

namespace crl::policy {

struct GenerationOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  std::vector<int64_t> stop_token_ids;     // e.g. the config's eos ids
  std::vector<std::string> stop_strings;   // need a decoder
  int64_t pad_token_id = 0;                // input of the unused rows of a fixed-shape (graph) decode step
  bool use_cuda_graph = true;              // CUDA only

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
  double prefill_seconds = 0;   // prompt passes (one per distinct prompt)
  double decode_seconds = 0;    // decode steps, host bookkeeping included
  int64_t decode_steps = 0;     // forward passes of the running set
  int64_t prefill_tokens = 0;   // prompt tokens run through the model (shared prompts once)
  int64_t decoded_rows = 0;     // sum over steps of the sequences in the step (no padding rows)
  int64_t peak_running = 0;     // most sequences in one step
  bool used_cuda_graph = false;
};

// Turns token ids into text; generation uses it for stop strings and GeneratedSequence::text.
using TokenDecoder = std::function<std::string(const std::vector<int64_t>&)>;

// Generates a completion for every prompt (token ids), in order. Equal prompts are prefilled once
// and share their KV cache blocks (a GRPO group passes the same prompt G times). Sequence i draws
// its tokens from the seed and i alone, so its completion does not depend on the other prompts.
// The KV cache is sized for this call; a caller that generates repeatedly should keep a
// GenerationEngine (engine.h), whose cache and CUDA graphs persist. `decode` is needed for stop strings.
GenerationResult generate(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                          const GenerationOptions& options, const TokenDecoder& decode = nullptr);

}  // namespace crl::policy
