// Token sampling on the logits' device: warpers as transformers applies them, inversion with a
// counter-based uniform per row.
#include "policy/sampling.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/statistics.h"

namespace crl::policy {
namespace {

constexpr int64_t kLow32 = 0xFFFFFFFFLL;

// A 32-bit integer mixer on int64 tensors holding values in [0, 2^32). Every product stays below
// 2^59, so nothing overflows int64 on any device.
torch::Tensor mix32(torch::Tensor x) {
  x = torch::bitwise_and(torch::bitwise_xor(x, x.__rshift__(16)) * 0x45d9f3bLL, kLow32);
  x = torch::bitwise_and(torch::bitwise_xor(x, x.__rshift__(16)) * 0x45d9f3bLL, kLow32);
  return torch::bitwise_xor(x, x.__rshift__(16));
}

}  // namespace

void SamplingOptions::validate() const {
  if (!(temperature >= 0) || !std::isfinite(temperature)) {
    throw InputError(fmt::format("sampling: temperature {} must be a finite number >= 0", temperature));
  }
  if (!(top_p > 0 && top_p <= 1)) throw InputError(fmt::format("sampling: top_p {} must be in (0, 1]", top_p));
  if (top_k < 0) throw InputError(fmt::format("sampling: top_k {} must be >= 0 (0 turns it off)", top_k));
}

int64_t sequence_key(uint64_t seed, uint64_t index) {
  return static_cast<int64_t>(mix64(mix64(seed) ^ index) & 0xFFFFFFFFULL);
}

torch::Tensor sequence_keys(uint64_t seed, int64_t batch, torch::Device device) {
  std::vector<int64_t> keys(batch);
  for (int64_t b = 0; b < batch; ++b) keys[b] = sequence_key(seed, static_cast<uint64_t>(b));
  return torch::tensor(keys, torch::kInt64).to(device);
}

torch::Tensor counter_uniform(const torch::Tensor& keys, const torch::Tensor& steps) {
  // steps < 2^31 and the golden-ratio constant < 2^32: the product fits in int64.
  const torch::Tensor step_key =
      mix32(torch::bitwise_and(keys + torch::bitwise_and(steps.reshape({-1}), 0x7FFFFFFFLL) * 0x9E3779B1LL, kLow32));
  const torch::Tensor h = mix32(torch::bitwise_and(torch::bitwise_xor(step_key, 0x5BD1E995LL) + keys, kLow32));
  return uniform_from_bits(h.__rshift__(8));
}

int64_t counter_bits(int64_t key, int64_t step) {
  // counter_uniform's arithmetic on one value: uint32 products wrap as the int64 ops' masks do.
  const auto mix = [](uint32_t x) {
    x = (x ^ (x >> 16)) * 0x45d9f3bU;
    x = (x ^ (x >> 16)) * 0x45d9f3bU;
    return x ^ (x >> 16);
  };
  const uint64_t k = static_cast<uint64_t>(key);
  const uint32_t step_key = mix(static_cast<uint32_t>(k + (static_cast<uint64_t>(step) & 0x7FFFFFFFULL) * 0x9E3779B1ULL));
  const uint32_t h = mix(static_cast<uint32_t>(static_cast<uint64_t>(step_key ^ 0x5BD1E995U) + k));
  return static_cast<int64_t>(h >> 8);
}

torch::Tensor uniform_from_bits(const torch::Tensor& bits) {
  // (bits + 0.5) / 2^24 is exact in float32 and strictly inside (0, 1).
  return (bits.to(torch::kFloat32) + 0.5f) * (1.0f / 16777216.0f);
}

torch::Tensor filter_logits(const torch::Tensor& logits, const SamplingOptions& options) {
  torch::Tensor scores = logits.to(torch::kFloat32);
  if (options.temperature > 0 && options.temperature != 1.0) scores = scores / options.temperature;
  const int64_t vocab = scores.size(-1);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  if (options.top_k > 0 && options.top_k < vocab) {
    const torch::Tensor kth = std::get<0>(torch::topk(scores, options.top_k, -1)).narrow(-1, options.top_k - 1, 1);
    scores = scores.masked_fill(scores < kth, neg_inf);
  }
  if (options.top_p < 1.0) {
    // transformers' TopPLogitsWarper: sort ascending, drop the tail whose cumulative probability is
    // <= 1 - top_p, always keep the most likely token.
    auto [sorted, order] = torch::sort(scores, -1, /*descending=*/false);
    const torch::Tensor cumulative = sorted.softmax(-1).cumsum(-1);
    torch::Tensor remove_sorted = cumulative <= (1.0 - options.top_p);
    remove_sorted.narrow(-1, vocab - 1, 1).fill_(false);
    const torch::Tensor remove = remove_sorted.scatter(-1, order, remove_sorted);
    scores = scores.masked_fill(remove, neg_inf);
  }
  return scores;
}

SampledTokens sample_tokens(const torch::Tensor& logits, const SamplingOptions& options, const torch::Tensor& keys,
                            const torch::Tensor& steps) {
  if (logits.dim() != 2) throw InputError("sample_tokens: logits must be [batch, vocab]");
  // Greedy decoding draws nothing: no hashing either.
  return sample_tokens_with_uniform(logits, options, options.temperature == 0 ? torch::Tensor() : counter_uniform(keys, steps));
}

SampledTokens sample_tokens_with_uniform(const torch::Tensor& logits, const SamplingOptions& options, const torch::Tensor& uniform) {
  if (logits.dim() != 2) throw InputError("sample_tokens: logits must be [batch, vocab]");
  const torch::Tensor logits32 = logits.to(torch::kFloat32);
  const torch::Tensor log_total = logits32.logsumexp(-1, /*keepdim=*/true);  // [B, 1]
  const auto logprob_of = [](const torch::Tensor& scores, const torch::Tensor& total, const torch::Tensor& tokens) {
    return (scores.gather(-1, tokens.unsqueeze(-1)) - total).squeeze(-1);
  };
  SampledTokens out;
  if (options.temperature == 0) {
    out.tokens = logits32.argmax(-1);
    out.logprobs = torch::zeros({logits.size(0)}, logits32.options());
    out.model_logprobs = logprob_of(logits32, log_total, out.tokens);
    return out;
  }
  // Plain sampling from softmax needs no filtered copy of the logits.
  const bool plain = options.temperature == 1.0 && options.top_k == 0 && options.top_p >= 1.0;
  const torch::Tensor scores = plain ? logits32 : filter_logits(logits32, options);
  const torch::Tensor score_total = plain ? log_total : scores.logsumexp(-1, /*keepdim=*/true);
  const torch::Tensor cumulative = (scores - score_total).exp_().cumsum(-1);
  const int64_t vocab = logits.size(1);
  const torch::Tensor target = uniform.unsqueeze(1) * cumulative.narrow(1, vocab - 1, 1);
  // The first index whose cumulative probability reaches the target: a token the filters removed
  // adds nothing to the sum, so it is never the first to reach a target > 0.
  out.tokens = torch::searchsorted(cumulative, target).squeeze(1).clamp_max(vocab - 1);
  out.logprobs = logprob_of(scores, score_total, out.tokens);
  out.model_logprobs = plain ? out.logprobs : logprob_of(logits32, log_total, out.tokens);
  return out;
}

}  // namespace crl::policy
