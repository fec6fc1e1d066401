// The verdict as an evaluation builds it: the named checks (CheckStep) each stage records, with
// what it saw and how long it took, and the evaluation's clock.
#pragma once

#include <chrono>
#include <string>

#include "eval/verdict.h"

namespace crl::eval {

using Clock = std::chrono::steady_clock;

class Trace {
 public:
  explicit Trace(Verdict initial) : verdict_(std::move(initial)) {}
  // A check that started at `since` and ends now.
  void step(std::string name, bool passed, std::string detail, Clock::time_point since);
  Verdict& verdict() { return verdict_; }
  const Verdict& verdict() const { return verdict_; }
  double seconds() const;  // since the evaluation started

 private:
  Verdict verdict_;
  Clock::time_point start_ = Clock::now();
};

}  // namespace crl::eval
