// Token sampling on the logits' device: warpers as transformers applies them, Gumbel-max with
// counter-based noise.
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

torch::Tensor sequence_keys(uint64_t seed, int64_t batch, torch::Device device) {
  std::vector<int64_t> keys(batch);
  const uint64_t seed_mix = mix64(seed);
  for (int64_t b = 0; b < batch; ++b) {
    keys[b] = static_cast<int64_t>(mix64(seed_mix ^ static_cast<uint64_t>(b)) & 0xFFFFFFFFULL);
  }
  return torch::tensor(keys, torch::kInt64).to(device);
}

torch::Tensor counter_uniform(const torch::Tensor& keys, const torch::Tensor& step, int64_t vocab) {
  // step < 2^31 and the golden-ratio constant < 2^32: the product fits in int64.
  const torch::Tensor step_key =
      mix32(torch::bitwise_and(keys + torch::bitwise_and(step.reshape({1}), 0x7FFFFFFFLL) * 0x9E3779B1LL, kLow32));
  const torch::Tensor columns = torch::arange(vocab, keys.options()).unsqueeze(0);
  torch::Tensor h = mix32(torch::bitwise_xor(columns, step_key.unsqueeze(1)));
  h = mix32(torch::bitwise_and(h + step_key.unsqueeze(1), kLow32));
  // 24 high bits: (h + 0.5) / 2^24 is exact in float32 and strictly inside (0, 1).
  return (h.__rshift__(8).to(torch::kFloat32) + 0.5f) * (1.0f / 16777216.0f);
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
                            const torch::Tensor& step) {
  if (logits.dim() != 2) throw InputError("sample_tokens: logits must be [batch, vocab]");
  const torch::Tensor logits32 = logits.to(torch::kFloat32);
  SampledTokens out;
  if (options.temperature == 0) {
    out.tokens = logits32.argmax(-1);
    out.logprobs = torch::zeros({logits.size(0)}, logits32.options());
  } else {
    const torch::Tensor log_probs = filter_logits(logits32, options).log_softmax(-1);
    const torch::Tensor uniform = counter_uniform(keys, step, logits.size(1));
    const torch::Tensor gumbel = -torch::log(-torch::log(uniform));
    out.tokens = (log_probs + gumbel).argmax(-1);
    out.logprobs = log_probs.gather(-1, out.tokens.unsqueeze(-1)).squeeze(-1);
  }
  out.model_logprobs = logits32.log_softmax(-1).gather(-1, out.tokens.unsqueeze(-1)).squeeze(-1);
  return out;
}

}  // namespace crl::policy
