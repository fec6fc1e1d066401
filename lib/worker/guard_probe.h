// Hack-guard probes that run inside the candidate's worker after the correctness trials: threads
// and work still running after forward returned, outputs that alias or do not own their memory,
// inputs modified in place, outputs cached across calls, stale (uninitialised) memory. They run
// in the candidate's own process, so a determined program can defeat them; they name the common
// hacks precisely, while the judge's checks (docs/evaluation.md) are what the reward rests on.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <string>
#include <vector>

#include "program/arguments.h"
#include "program/task_spec.h"
#include "program/value_mix.h"
#include "worker/protocol.h"

namespace crl::worker {

// The candidate's forward. wait_for_device: return only after a device-wide synchronisation and a
// CUDA error check, as every ordinary call does; false: return as soon as forward does, so that
// work it left on other streams may still be running (what the deferred-work probe must see).
using CandidateForward = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&, bool wait_for_device)>;

// The probes' findings: checks the worker judged alone (failed: hack:<kind>), and groups of
// consecutive outputs that the judge must compare with the reference's outputs for the request's
// seeds[seed_index] (a mismatch there is hack:<kind>). The candidate's worker exports the outputs.
struct GuardOutputs {
  std::vector<GuardCheck> checks;
  std::vector<GuardGroup> groups;
  std::vector<at::Tensor> outputs;
};

// Runs the probes of request.part (1: the first call, new values at the same addresses; 2: the
// same values at new addresses; 3: stale memory):
// request.seeds are two trial seeds A and B (the judge holds the reference's
// outputs for both), request.output_bytes the reference's output sizes, settle_seconds how long to
// wait before outputs are looked at again. The seeds' arguments are made as the judge makes the
// trials' (`mix`, program/value_mix.h); `fixed`: params that stand in for the drawn ones
// (KernelBench's rule), as the judge's own arguments hold them.
GuardOutputs run_guard_probes(const GuardRequest& request, const TaskSpec& spec, const std::string& scale, const ValueMix& mix,
                              const at::Device& device, const CandidateForward& candidate, const FixedParams& fixed = {});

// Threads of this process now (entries of /proc/self/task).
int count_process_threads();

// Whether the bytes of two tensors' storages overlap.
bool storages_overlap(const at::Tensor& a, const at::Tensor& b);

}  // namespace crl::worker
