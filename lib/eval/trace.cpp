// The verdict's steps as the stages record them.
#include "eval/trace.h"

#include "core/clock.h"

namespace crl::eval {

void Trace::step(std::string name, bool passed, std::string detail, Clock::time_point since) {
  verdict_.steps.push_back({std::move(name), passed, std::move(detail), seconds_since(since)});
}

double Trace::seconds() const { return seconds_since(start_); }

}  // namespace crl::eval
