// The secret's draws.
#include "eval/secret_draws.h"

#include <random>
#include <string>

#include "core/hash.h"

namespace crl::eval {
namespace {

constexpr uint64_t kSixtyBits = (uint64_t{1} << 60) - 1;

uint64_t mix_seed(uint64_t seed, const std::string& task_id, const std::string& purpose, uint64_t index) {
  Sha256 h;
  h.field(std::to_string(seed)).field(task_id).field(purpose).field(std::to_string(index));
  return std::stoull(h.hex().substr(0, 15), nullptr, 16);
}

}  // namespace

uint64_t fresh_secret() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32 ^ device()) & kSixtyBits;
}

std::vector<uint64_t> trial_seeds(uint64_t secret, int trials, const std::string& task_id) {
  std::vector<uint64_t> seeds;
  for (int i = 0; i < trials; ++i) seeds.push_back(mix_seed(secret, task_id, "trial", static_cast<uint64_t>(i)));
  return seeds;
}

std::vector<uint64_t> edge_trial_seeds(uint64_t secret, int count, const std::string& task_id) {
  std::vector<uint64_t> seeds;
  for (int i = 0; i < count; ++i) seeds.push_back(mix_seed(secret, task_id, "edge trial", static_cast<uint64_t>(i)));
  return seeds;
}

uint64_t bootstrap_seed(uint64_t secret, const std::string& task_id) { return mix_seed(secret, task_id, "bootstrap", 0); }

uint64_t value_probe_seed(uint64_t secret, const std::string& task_id) { return mix_seed(secret, task_id, "value probe", 0); }
uint64_t kernelbench_seed_of(uint64_t secret, const std::string& task_id) {
  const uint64_t seed = mix_seed(secret, task_id, "kernelbench params", 0) & kSixtyBits;
  return seed != 0 ? seed : 1;
}

uint64_t timing_draw(uint64_t secret, const std::string& task_id, uint64_t index) {
  return mix_seed(secret, task_id, "timing", index);
}

std::vector<uint64_t> draw_warmup(SecretDraws& draws, int slots) {
  std::vector<uint64_t> seeds;
  for (int s = 0; s < slots; ++s) seeds.push_back(draws.next() & kSixtyBits);
  return seeds;
}

PairDraws draw_pair(SecretDraws& draws, int slots) {
  PairDraws pair;
  for (int s = 0; s < slots; ++s) pair.seeds.push_back(draws.next() & kSixtyBits);
  pair.reference_first = draws.next() & 1;
  pair.checked_slot = static_cast<int>(draws.next() % static_cast<uint64_t>(slots));
  return pair;
}

}  // namespace crl::eval
