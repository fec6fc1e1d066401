// Choosing the next token on the device that holds the logits: temperature, top-k, top-p, and a
// seeded, counter-based random source, so the decode loop never waits for the host and a CUDA graph
// can replay it.
//
// Randomness: the uniform number for (sequence key, step) is an integer hash of the two, computed
// with tensor ops on [B] values, so it needs no generator state and depends on nothing but the
// sequence: the same seed gives the same tokens on every run, whatever other sequences share the
// batch. A token is drawn by inversion: the first index whose cumulative probability reaches
// u * total, which draws exactly from the (filtered) softmax, up to float32 rounding of the
// cumulative sum and the 24 bits of u. Per step it makes two [B, V] float32 temporaries (the
// probabilities and their cumulative sum); greedy decoding makes none beyond the fp32 logits.
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

// The sampling key of sequence `index` under `seed`: a 32-bit value in an int64.
int64_t sequence_key(uint64_t seed, uint64_t index);
// The keys of sequences 0 .. batch-1: [B] int64 on `device`.
torch::Tensor sequence_keys(uint64_t seed, int64_t batch, torch::Device device);

// One uniform number in (0, 1) per row, float32 [B], a pure function of (keys[b], steps[b]).
// `steps` is int64 [B] or [1] (one step for every row), on the keys' device, so that advancing it
// needs no host round trip.
torch::Tensor counter_uniform(const torch::Tensor& keys, const torch::Tensor& steps);
// The same number's 24 random bits for one (key, step), computed on the host: a decode loop that
// knows its keys and steps there ships the bits with the step's inputs instead of hashing on the
// device. uniform_from_bits turns int64 bits [B] into counter_uniform's float32 values.
int64_t counter_bits(int64_t key, int64_t step);
torch::Tensor uniform_from_bits(const torch::Tensor& bits);

// Applies temperature, then top-k, then top-p to `logits` [B, V] (as transformers' warpers do, in
// that order) and returns the filtered, temperature-scaled logits in float32 (removed tokens -inf).
torch::Tensor filter_logits(const torch::Tensor& logits, const SamplingOptions& options);

// Chooses one token per row of `logits` [B, V]; row b draws with counter_uniform(keys, steps)[b].
SampledTokens sample_tokens(const torch::Tensor& logits, const SamplingOptions& options, const torch::Tensor& keys,
                            const torch::Tensor& steps);
// The same with row b's uniform number given: `uniform` float32 [B] in (0, 1).
SampledTokens sample_tokens_with_uniform(const torch::Tensor& logits, const SamplingOptions& options, const torch::Tensor& uniform);

}  // namespace crl::policy
