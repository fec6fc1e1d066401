// Learning-rate schedule: linear warm-up from 0 to the peak, then cosine decay to min_ratio * peak.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

namespace crl::rl {

struct LrSchedule {
  double peak_lr = 1e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;    // warm-up included; after it the rate stays at the floor
  double min_ratio = 0.1;     // floor as a fraction of the peak

  // The rate for optimiser step `step` (0-based): (step + 1) / warmup * peak during warm-up.
  double lr_at(int64_t step) const;
  // Throws InputError unless peak > 0, 0 <= warmup <= total, total >= 1, 0 <= min_ratio <= 1.
  void validate() const;
  nlohmann::json to_json() const;
  static LrSchedule from_json(const nlohmann::json& j, const std::string& origin);
};

}  // namespace crl::rl
