// Running reward normalisation, clipping and group advantages (rules in reward_shaping.h).
#include "rl/reward_shaping.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "rl/losses.h"

namespace crl::rl {

RewardNormalizer::RewardNormalizer(int64_t window, double clip) : capacity_(window), clip_(clip) {
  if (window < 2) throw InputError(fmt::format("reward window must be at least 2 rollouts (got {})", window));
  if (!(clip > 0)) throw InputError(fmt::format("reward clip must be > 0 (got {})", clip));
}

double RewardNormalizer::mean() const {
  if (window_.empty()) return 0;
  double sum = 0;
  for (double r : window_) sum += r;
  return sum / static_cast<double>(window_.size());
}

double RewardNormalizer::stddev() const {
  if (window_.empty()) return 0;
  const double m = mean();
  double sum = 0;
  for (double r : window_) sum += (r - m) * (r - m);
  return std::sqrt(sum / static_cast<double>(window_.size()));
}

std::vector<double> RewardNormalizer::normalize(const std::vector<double>& rewards) {
  for (double r : rewards) {
    if (!std::isfinite(r)) throw Error(fmt::format("reward {} is not finite", r));
    window_.push_back(r);
    while (static_cast<int64_t>(window_.size()) > capacity_) window_.pop_front();
  }
  const double m = mean();
  double s = stddev();
  if (s < 1e-8) s = 1;
  std::vector<double> out;
  out.reserve(rewards.size());
  for (double r : rewards) out.push_back(std::clamp((r - m) / s, -clip_, clip_));
  return out;
}

nlohmann::json RewardNormalizer::to_json() const {
  return {{"window", capacity_}, {"clip", clip_}, {"rewards", std::vector<double>(window_.begin(), window_.end())}};
}

void RewardNormalizer::load_json(const nlohmann::json& state, const std::string& origin) {
  if (!state.is_object() || !state.contains("rewards") || !state["rewards"].is_array()) {
    throw InputError(fmt::format("{}: reward normaliser state lacks its 'rewards' list", origin));
  }
  std::deque<double> loaded;
  for (const auto& v : state["rewards"]) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      throw InputError(fmt::format("{}: reward normaliser state holds a non-number", origin));
    }
    loaded.push_back(v.get<double>());
  }
  while (static_cast<int64_t>(loaded.size()) > capacity_) loaded.pop_front();
  window_ = std::move(loaded);
}

ShapedRewards shape_rewards(const std::vector<double>& rewards, const std::vector<bool>& included, int64_t group_size,
                            RewardNormalizer& normalizer) {
  if (rewards.size() != included.size()) throw Error("shape_rewards: rewards and included differ in length");
  if (group_size < 1 || rewards.size() % static_cast<size_t>(group_size) != 0) {
    throw Error(fmt::format("shape_rewards: {} rollouts do not form groups of {}", rewards.size(), group_size));
  }
  std::vector<double> kept;
  for (size_t i = 0; i < rewards.size(); ++i) {
    if (included[i]) kept.push_back(rewards[i]);
  }
  const std::vector<double> normalized_kept = normalizer.normalize(kept);
  ShapedRewards out;
  out.normalized.assign(rewards.size(), 0.0);
  out.advantages.assign(rewards.size(), 0.0);
  for (size_t i = 0, k = 0; i < rewards.size(); ++i) {
    if (included[i]) out.normalized[i] = normalized_kept[k++];
  }
  for (size_t g = 0; g < rewards.size(); g += static_cast<size_t>(group_size)) {
    std::vector<size_t> members;
    std::vector<double> values;
    for (size_t i = g; i < g + static_cast<size_t>(group_size); ++i) {
      if (!included[i]) continue;
      members.push_back(i);
      values.push_back(out.normalized[i]);
    }
    if (members.size() < 2) continue;
    const torch::Tensor adv =
        group_advantages(torch::tensor(values, torch::kFloat64), static_cast<int64_t>(members.size()));
    for (size_t j = 0; j < members.size(); ++j) out.advantages[members[j]] = adv[static_cast<int64_t>(j)].item<double>();
  }
  return out;
}

}  // namespace crl::rl
