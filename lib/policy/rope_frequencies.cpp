// Rotary inverse frequencies of a ModelConfig, computed with torch as transformers does (the one
// part of config.h that needs LibTorch, kept apart so config.json parsing builds without it).
#include <torch/torch.h>

#include <cmath>
#include <numbers>

#include "policy/config.h"

namespace crl::policy {

// Computed with float32 torch ops in the order transformers uses, so the frequencies agree bit for bit.
RopeFrequencies rope_frequencies(const ModelConfig& config) {
  const RopeSettings& rope = config.rope;
  const int64_t dim = config.head_dim;
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  const torch::Tensor exponents = torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) / static_cast<double>(dim);
  const torch::Tensor pos_freqs = torch::pow(rope.theta, exponents);
  torch::Tensor inv_freq = 1.0 / pos_freqs;
  double attention_scaling = 1.0;
  switch (rope.type) {
    case RopeType::kDefault:
    case RopeType::kDynamic:  // equal to default while positions stay within max_position_embeddings
      break;
    case RopeType::kLinear:
      inv_freq = inv_freq / rope.factor;
      break;
    case RopeType::kLlama3: {
      const double old_context = static_cast<double>(rope.original_max_position_embeddings);
      const double low_freq_wavelen = old_context / rope.low_freq_factor;
      const double high_freq_wavelen = old_context / rope.high_freq_factor;
      const torch::Tensor wavelen = 2 * std::numbers::pi / inv_freq;
      torch::Tensor scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / rope.factor, inv_freq);
      const torch::Tensor smooth = (old_context / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
      const torch::Tensor smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled;
      const torch::Tensor medium = (~(wavelen < high_freq_wavelen)) * (~(wavelen > low_freq_wavelen));
      inv_freq = torch::where(medium, smoothed, scaled);
      break;
    }
    case RopeType::kYarn: {
      double factor = rope.factor;
      const double original = static_cast<double>(rope.original_max_position_embeddings);
      auto get_mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
      if (rope.attention_factor) {
        attention_scaling = *rope.attention_factor;
      } else if (rope.mscale && rope.mscale_all_dim && *rope.mscale != 0 && *rope.mscale_all_dim != 0) {
        attention_scaling = get_mscale(factor, *rope.mscale) / get_mscale(factor, *rope.mscale_all_dim);
      } else {
        attention_scaling = get_mscale(factor, 1.0);
      }
      auto correction_dim = [&](double rotations) {
        return (dim * std::log(original / (rotations * 2 * std::numbers::pi))) / (2 * std::log(rope.theta));
      };
      double low = correction_dim(rope.beta_fast);
      double high = correction_dim(rope.beta_slow);
      if (rope.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(dim - 1));
      if (low == high) high += 0.001;
      const torch::Tensor ramp = torch::clamp((torch::arange(dim / 2, f32) - low) / (high - low), 0, 1);
      const torch::Tensor extrapolation_factor = 1 - ramp;
      const torch::Tensor interpolation = 1.0 / (factor * pos_freqs);
      inv_freq = interpolation * (1 - extrapolation_factor) + inv_freq * extrapolation_factor;
      break;
    }
  }
  inv_freq = inv_freq.contiguous();
  RopeFrequencies result;
  result.inv_freq.assign(inv_freq.data_ptr<float>(), inv_freq.data_ptr<float>() + inv_freq.numel());
  result.attention_scaling = attention_scaling;
  return result;
}

}  // namespace crl::policy
