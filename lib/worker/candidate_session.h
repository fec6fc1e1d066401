// The candidate role of crl-worker: runs one candidate program and nothing else, inside the
// sandbox (lib/worker/sandbox.h), on inputs the judge wrote into the arena; its outputs stay in this
// process and leave only as TensorRefs that the judge (or the evaluator) reads while it is frozen.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "program/value_mix.h"
#include "program/arguments.h"
#include "worker/protocol.h"
#include "worker/sandbox.h"
#include "worker/worker_device.h"

namespace crl::worker {

class CandidateSession {
 public:
  // `file_rules`: the sandbox whose first part the worker applied at start; load applies the rest
  // (apply_sandbox_after_device; none: no sandbox).
  explicit CandidateSession(std::optional<SandboxPolicy> file_rules = std::nullopt)
      : file_rules_(std::move(file_rules)) {}
  // One request as it arrived (protocol.h) and its reply; throws for a request it cannot serve.
  nlohmann::json handle(const nlohmann::json& request);
  bool poisoned() const { return device_.poisoned(); }
  const WorkerDevice& device() const { return device_; }

  LoadReply on(const LoadRequest& request);
  ArenaReply on(const ArenaRequest& request);
  RunReply on(const RunRequest& request);
  TimeReply on(const TimeRequest& request);
  GuardReply on(const GuardRequest& request);
  NoReply on(const StartTimingRequest& request);
  NoReply on(const ReleaseRequest& request);
  NoReply on(const MemoryShareRequest& request);

 private:
  nlohmann::json serve(Op op, const nlohmann::json& request);
  // Empties the caching allocator, and forgets the exports of the allocations it gave back.
  void release_cached_memory();

  WorkerDevice device_;
  bool release_after_requests_ = false;  // DeviceSettings
  std::optional<TaskSpec> spec_;
  std::string scale_;
  ValueMix value_mix_;  // the judge's (load request): the guards' inputs are made as its trials'
  std::unique_ptr<NamedProgram> candidate_;
  // KernelBench's rule, for a .crl candidate: Model's params, in the arguments this worker makes
  // itself (the guards'), as the judge's hold them; empty otherwise.
  FixedParams fixed_params_;
  InputArena arena_;
  // Outputs the last request described: alive until the next request, so the judge can read them.
  std::vector<at::Tensor> held_;
  ExportedAllocations exports_;  // the timed outputs' allocations, each exported once (describe_batch)
  EventPool events_;
  std::optional<SandboxPolicy> file_rules_;
  // The reference's timing worker under baseline cuda_graph: each slot's call captured once (at
  // start_timing) and replayed by `time`; the evaluator never asks this of a candidate's worker.
  bool replay_as_graph_ = false;
  bool times_the_reference_ = false;  // the reference's timing worker: its timed outputs are not exported (describe_batch)
  struct SlotGraph;
  std::vector<std::shared_ptr<SlotGraph>> graphs_;
};

}  // namespace crl::worker
