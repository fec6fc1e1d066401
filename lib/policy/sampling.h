// Choosing the next token on the device that holds the logits: temperature, top-k, top-p, and a
// seeded, counter-based random source, so the decode loop never waits for the host.
//
// Randomness: the noise for (sequence key, step, vocabulary index) is an integer hash of the three,
// computed with tensor ops, so it needs no generator state: the same seed gives the same tokens on
// every run, whatever else ran before, and a CUDA graph could replay it. Sampling uses the Gumbel-max
// trick (argmax of log p + Gumbel noise), which draws exactly from softmax.
//
// Log-probabilities returned for each chosen token:
//   logprob        under the distribution actually sampled from: softmax(logits / T) restricted to
//                  the top-k and top-p set and renormalised (0 for greedy decoding, T = 0);
//   model_logprob  under the model's own distribution, log_softmax(logits) at temperature 1 with no
//                  truncation: what a policy-gradient ratio against the trained model needs.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace crl::policy {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (argmax)
  double top_p = 1.0;        // nucleus: keep the smallest set whose probability reaches top_p (1: off)
  int64_t top_k = 0;         // keep the k most likely tokens (0: off)
  uint64_t seed = 0;

  // Throws InputError naming the option when a value is out of range.
  void validate() const;
};

struct SampledTokens {
  torch::Tensor tokens;          // [B] int64
  torch::Tensor logprobs;        // [B] float32, under the sampling distribution (see above)
  torch::Tensor model_logprobs;  // [B] float32, log_softmax(logits) of the chosen token
};

// One key per sequence, derived from the seed and the sequence's index: [B] int64 on `device`.
torch::Tensor sequence_keys(uint64_t seed, int64_t batch, torch::Device device);

// Uniform noise in (0, 1), float32 [B, V], a pure function of (keys[b], step, v). `step` is an int64
// tensor with one element (on the keys' device) so that advancing it needs no host round trip.
torch::Tensor counter_uniform(const torch::Tensor& keys, const torch::Tensor& step, int64_t vocab);

// Applies temperature, then top-k, then top-p to `logits` [B, V] (as transformers' warpers do, in
// that order) and returns the filtered, temperature-scaled logits in float32 (removed tokens -inf).
torch::Tensor filter_logits(const torch::Tensor& logits, const SamplingOptions& options);

// Chooses one token per row of `logits` [B, V].
SampledTokens sample_tokens(const torch::Tensor& logits, const SamplingOptions& options, const torch::Tensor& keys,
                            const torch::Tensor& step);

}  // namespace crl::policy
