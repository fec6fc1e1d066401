// The state of one crl-worker: the task's spec, the loaded reference and candidate libraries,
// the timing state, and the handlers of the evaluator's requests.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eval/worker_channel.h"
#include "program/task_spec.h"

namespace crl::worker {

// A program library loaded with dlopen (lib/compile's LoadedProgram) and its role.
class NamedProgram;

class WorkerSession {
 public:
  WorkerSession();
  ~WorkerSession();

  // Handles one request; throws on failure (the caller turns that into an error reply).
  eval::Message handle(const eval::Message& request);
  // Whether the device is now unusable (a sticky CUDA error): the worker must exit after replying.
  bool poisoned() const { return poisoned_; }

 private:
  eval::Message load(const nlohmann::json& request);
  eval::Message run(const nlohmann::json& request);
  eval::Message time(const nlohmann::json& request);
  NamedProgram& program(const std::string& which);
  // Runs the program's forward, then (wait_for_device) synchronises the whole device and checks
  // for CUDA errors; without that, returns as soon as forward does (the deferred-work probe).
  std::vector<at::Tensor> call(NamedProgram& program, const std::vector<at::Tensor>& args, bool wait_for_device = true);
  // After a program ran on CUDA: synchronises and throws when the device reports an error.
  void check_device(const std::string& after);
  void flush_caches();
  // Empty when a timed call's outputs agree with the reference's on the same inputs (within the
  // task's tolerance); else what differs.
  std::string timed_outputs_disagreement(const std::vector<at::Tensor>& reference,
                                         const std::vector<at::Tensor>& candidate) const;

  std::optional<TaskSpec> spec_;
  std::string scale_;
  at::Device device_{at::kCPU};
  std::unique_ptr<NamedProgram> reference_;
  std::unique_ptr<NamedProgram> candidate_;
  at::Tensor flush_buffer_;
  int64_t flush_counter_ = 0;
  bool warmed_up_ = false;
  bool poisoned_ = false;
};

}  // namespace crl::worker
