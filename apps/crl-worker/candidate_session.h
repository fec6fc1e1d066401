// The candidate role of crl-worker: runs one candidate program and nothing else, inside the
// sandbox (lib/eval/sandbox.h), on inputs the judge wrote into the arena; its outputs stay in this
// process and leave only as TensorRefs that the judge (or the evaluator) reads while it is frozen.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/crl-worker/worker_device.h"
#include "eval/sandbox.h"
#include "eval/worker_channel.h"

namespace crl::worker {

class CandidateSession {
 public:
  // `file_rules`: the sandbox whose first part the worker applied at start; load applies the rest
  // (eval::apply_sandbox_after_device; none: no sandbox).
  explicit CandidateSession(std::optional<eval::SandboxPolicy> file_rules = std::nullopt)
      : file_rules_(std::move(file_rules)) {}
  eval::Message handle(const eval::Message& request);
  bool poisoned() const { return device_.poisoned(); }

 private:
  eval::Message load(const nlohmann::json& request);
  eval::Message run(const nlohmann::json& request);
  eval::Message time(const nlohmann::json& request);
  eval::Message guard(const nlohmann::json& request);
  eval::Message start_timing(const nlohmann::json& request);

  WorkerDevice device_;
  std::optional<TaskSpec> spec_;
  std::string scale_;
  std::unique_ptr<NamedProgram> candidate_;
  InputArena arena_;
  // Outputs the last request described: alive until the next request, so the judge can read them.
  std::vector<at::Tensor> held_;
  EventPool events_;
  std::optional<eval::SandboxPolicy> file_rules_;
  // The reference's timing worker under baseline cuda_graph: each slot's call captured once (at
  // start_timing) and replayed by `time`; the evaluator never asks this of a candidate's worker.
  bool replay_as_graph_ = false;
  struct SlotGraph;
  std::vector<std::shared_ptr<SlotGraph>> graphs_;
};

}  // namespace crl::worker
