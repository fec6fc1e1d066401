// Whether the GPU is idle, by the judge's probe: waited for up to a limit, and said in words.
#pragma once

#include <string>

#include "eval/stages/evaluation.h"

namespace crl::eval {

// The GPU after a reply of the candidate's worker, frozen: probed until idle, for up to
// wait_seconds. A legitimate program's reply is now and then followed by probes that read busy
// with nothing of its own left (level1 008 and 097, seen on the H200), so one busy reading does
// not decide: what the callers do with the wait does (the outputs compared before and after it,
// or the wait charged to the timed batch).
struct IdleWait {
  bool asked = false;   // false: the judge failed
  bool idle = false;
  double waited_s = 0;  // from the first probe's request to the request of the one that read idle
  double checked_s = 0; // from the first probe's request until the deciding one answered: the whole check
  worker::ProbeReply first, last;
  bool busy_at_first() const { return asked && !first.idle; }
};
IdleWait await_idle(Evaluation& e, double wait_seconds);

// The judge's idle probe for a verdict: the deciding reading, then the first two (the first pays
// any switch between contexts; busy means the second and a retry slow too), so that a
// deferred-work verdict shows how the GPU behaved.
std::string probe_readings(const worker::ProbeReply& probe);
std::string describe_wait(const IdleWait& w);

}  // namespace crl::eval
