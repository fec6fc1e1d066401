// CUDA-L1's reward shaping, then GRPO's group-normalised advantages.
//
// 1. Rewards (the verdict's reward: 1 when its speedup's interval includes 1, else the bound nearer
//    1, truncated toward 1; failures 0: eval::reward_from_interval) enter a running
//    window of the last `window` rollouts (oldest out first).
// 2. Each reward of the step is normalised with the window's mean and standard deviation
//    (population std, over the window after this step's rewards joined it; a std below 1e-8
//    counts as 1), then clipped to [-clip, +clip].
// 3. Advantages: within each group (the G completions of one prompt), GRPO's group
//    normalisation of the clipped rewards (rl::group_advantages).
// Rollouts whose verdict is internal_error (crl's own failure) are left out of all three: they
// neither enter the window nor get an advantage (and the update skips them).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <vector>

namespace crl::rl {

class RewardNormalizer {
 public:
  RewardNormalizer(int64_t window, double clip);

  // Adds the rewards to the window, then returns each one normalised and clipped.
  std::vector<double> normalize(const std::vector<double>& rewards);

  double mean() const;
  double stddev() const;
  size_t size() const { return window_.size(); }

  // The window, for checkpoints; from_json validates it.
  nlohmann::json to_json() const;
  void load_json(const nlohmann::json& state, const std::string& origin);

 private:
  int64_t capacity_;
  double clip_;
  std::deque<double> window_;
};

struct ShapedRewards {
  std::vector<double> normalized;  // per rollout; 0 for excluded ones
  std::vector<double> advantages;  // per rollout; 0 for excluded ones
};

// Rollouts in consecutive groups of `group_size`; `included[i]` false leaves rollout i out (see
// above). A group with fewer than two included rollouts gets advantage 0 for all of them.
ShapedRewards shape_rewards(const std::vector<double>& rewards, const std::vector<bool>& included, int64_t group_size,
                            RewardNormalizer& normalizer);

}  // namespace crl::rl
