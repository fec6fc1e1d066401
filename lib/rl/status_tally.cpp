// StatusTally and stage_warning (status_tally.h).
#include "rl/status_tally.h"

#include <fmt/format.h>

#include <array>

namespace crl::rl {
namespace {

// The order of eval::VerdictStatus; a status not among them (none today) goes last.
int rank_of(const std::string& status) {
  static constexpr std::array<const char*, 9> kOrder = {"ok",       "compile_error", "runtime_error", "timeout",       "crash",
                                                        "mismatch", "hack",          "format_error",  "internal_error"};
  const std::string word = status.substr(0, status.find(':'));
  for (size_t i = 0; i < kOrder.size(); ++i) {
    if (word == kOrder[i]) return static_cast<int>(i);
  }
  return static_cast<int>(kOrder.size());
}

}  // namespace

void StatusTally::add(const std::string& status, int64_t n) { counts_[{rank_of(status), status}] += n; }

void StatusTally::add(const StatusTally& other) {
  for (const auto& [key, n] : other.counts_) counts_[key] += n;
}

int64_t StatusTally::total() const {
  int64_t n = 0;
  for (const auto& [key, count] : counts_) n += count;
  return n;
}

int64_t StatusTally::count(const std::string& status) const {
  const auto it = counts_.find({rank_of(status), status});
  return it == counts_.end() ? 0 : it->second;
}

std::string StatusTally::text() const {
  std::string out = fmt::format("ok {}", count("ok"));
  for (const auto& [key, n] : counts_) {
    if (key.second != "ok" && n > 0) out += fmt::format(", {} {}", key.second, n);
  }
  return out;
}

std::string stage_warning(const std::string& stage, int64_t last_step, const StatusTally& tally, bool resumed) {
  const int64_t total = tally.total();
  if (total == 0 || tally.count("ok") > 0) return "";
  const std::string which = fmt::format("the {} stage that ended at step {}{}", stage, last_step, resumed ? " (since it resumed)" : "");
  if (tally.count("format_error") == total) {
    return fmt::format("{} judged no program: all {} of its rollouts were format_error, completions without a program (a "
                       "closed fenced block holding a .crl program): too few sampling.max_new_tokens to close the block, "
                       "a prompt_format the model does not follow, or a model not trained to write programs yet (an sft "
                       "stage first); its rewards were all 0 and the policy learnt nothing from them",
                       which, total);
  }
  return fmt::format("{} had no correct program: none of its {} rollouts was ok ({}); its rewards were all 0 and the "
                     "policy learnt nothing from them",
                     which, total, tally.text());
}

}  // namespace crl::rl
