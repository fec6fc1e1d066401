// The one check of a candidate's outputs, for trials, guards, the per-sample guard and timed
// pairs alike: read while its worker is frozen, compared by the judge with the reference outputs it
// holds under a key, and on the GPU looked at again once the GPU is idle.
#pragma once

#include <string>
#include <vector>

#include "eval/stages/evaluation.h"

namespace crl::eval {

struct OutputCheck {
  enum class Problem {
    none,
    mismatch,       // wrong shapes, devices or values (or the worker died after replying)
    crash,          // the outputs could not be read where the worker said they were
    deferred_work,  // complete only after the reply, or work still running after it
    judge_failed,   // the judge could not compare (JudgeClient::out_of_memory says whether for memory)
  };
  Problem problem = Problem::none;
  std::string message;
  // The precision contract's ratio the judge found (CompareReply::precision_ratio; -1: no float64 reference).
  double precision_ratio = -1;
  bool ok() const { return problem == Problem::none; }
};

// How a step says the precision contract was kept: "" without a float64 reference.
std::string precision_words(const OutputCheck& check);

// On the GPU the judge probes first: idle, the outputs are compared; busy, they are compared as
// they are, then again once the GPU is idle (up to guard_settle_seconds): outputs that match only
// the second time were written after the reply (deferred work); outputs that matched at once were
// complete whatever the GPU was doing (legitimate references read busy now and then); a GPU still
// busy after the wait is work left running (deferred work).
OutputCheck check_outputs(Evaluation& e, WorkerProcess& worker, const std::vector<worker::TensorRef>& refs, const std::string& key);

}  // namespace crl::eval
