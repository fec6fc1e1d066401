// Verdict statuses counted: a step's for the progress line (every status that occurred, hacks by
// kind: "ok 5, compile_error 2, hack:aliasing 1, format_error 3"), and a generating stage's, whose
// end warns when not one of its rollouts was ok (its rewards were all 0: the policy learnt nothing).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace crl::rl {

class StatusTally {
 public:
  // `status` as a verdict's status_text: "ok", "mismatch", "hack:aliasing", ...
  void add(const std::string& status, int64_t n = 1);
  void add(const StatusTally& other);
  int64_t total() const;
  int64_t count(const std::string& status) const;
  // "ok 5, compile_error 2, hack:aliasing 1, format_error 3": ok first (also when 0), then every
  // status that occurred in the verdict's order of checks (eval/verdict.h), hacks by kind.
  std::string text() const;

 private:
  std::map<std::pair<int, std::string>, int64_t> counts_;  // keyed by (rank in the order above, status)
};

// The warning at the end of a generating stage (`stage` its kind, ended at job step `last_step`)
// whose rollouts `tally` counts: "" when one was ok, or when there were none. `resumed`: the tally
// covers only the steps since the stage resumed, and the warning says so.
std::string stage_warning(const std::string& stage, int64_t last_step, const StatusTally& tally, bool resumed);

}  // namespace crl::rl
