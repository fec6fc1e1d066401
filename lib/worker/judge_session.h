// The judge: the trusted role of crl-worker. It loads only the task's reference, makes every input
// (its own and, in two arenas, those of the candidate's worker and of the reference's timing
// worker; on the GPU each arena is that worker's own memory, imported here), runs the reference,
// keeps its outputs where they were made (on the GPU, in a cache bounded in bytes), compares a
// candidate's outputs with them, checks the candidate's inputs after its calls, and probes whether
// the GPU is idle.
#pragma once

#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "program/value_mix.h"
#include "program/arguments.h"
#include "worker/exchange.h"
#include "worker/protocol.h"
#include "worker/worker_device.h"

namespace crl::worker {

class JudgeSession {
 public:
  JudgeSession();
  ~JudgeSession();
  // One request as it arrived (protocol.h) and its reply; throws for a request it cannot serve.
  nlohmann::json handle(const nlohmann::json& request);
  bool poisoned() const { return device_.poisoned(); }
  const WorkerDevice& device() const { return device_; }

  LoadReply on(const LoadRequest& request);
  ReferenceReply on(const ReferenceRequest& request);
  CallTimeReply on(const CallTimeRequest& request);
  NoReply on(const MemoryShareRequest& request);
  BatchCopyReply on(const BatchCopyRequest& request);
  ArenaReply on(const ArenaRequest& request);
  AdoptArenaReply on(const AdoptArenaRequest& request);
  NoReply on(const DropArenaRequest& request);
  NoReply on(const FillRequest& request);
  NoReply on(const ReferenceSlotRequest& request);
  CompareReply on(const CompareRequest& request);
  CheckInputsReply on(const CheckInputsRequest& request);
  ProbeReply on(const ProbeRequest& request);
  ValuesReply on(const ValuesRequest& request);
  NoReply on(const ReleaseRequest& request);
  NoReply on(const FlushRequest& request);
  NoReply on(const EmptyRequest& request);

 private:
  struct Outputs {
    uint64_t seed = 0;
    bool spread = false;
    bool edges = false;  // an edge trial's (dense edges)
    bool float64 = false;  // the float64 reference's errors were asked for
    std::vector<at::Tensor> tensors;  // empty once evicted: made again from the seed when asked for
    std::vector<at::Tensor> deltas, scales;  // float64_reference.h, per output (undefined: none)
    std::string float64_missing;      // why there are none, where asked
    int64_t bytes = 0;
    // Lets go of the tensors (made again from the seed when next asked for).
    void evict() {
      tensors.clear();
      deltas.clear();
      scales.clear();
    }
  };
  struct KeptInputs {  // a slot's inputs made again by check_inputs, for reference_slot next
    uint64_t seed = 0;
    std::vector<at::Tensor> tensors;
  };
  InputArena& arena_named(ArenaOwner which);
  nlohmann::json serve(Op op, const nlohmann::json& request);

  // A call's arguments made from its seed (KernelBench's rule: params from fixed_params_).
  std::vector<at::Tensor> arguments_for(uint64_t seed, bool spread, bool edges);
  // The reference's outputs for `o`'s seed (and, where o.float64, their float64 errors), made now.
  void make_outputs(Outputs& o, size_t* spread_inputs = nullptr, std::vector<at::Tensor> args = {});
  void add_float64(Outputs& o);
  size_t nan_count(const std::vector<at::Tensor>& outputs) const;
  const std::vector<at::Tensor>& outputs_for(const std::string& key);
  void keep(const std::string& key, Outputs outputs);
  void evict_to(int64_t budget);
  // Every cached output let go, with the allocator's free blocks (after running out of memory).
  void release_all_outputs();
  template <typename Make>
  auto reclaiming(Make make) -> decltype(make());
  double probe_once();

  WorkerDevice device_;
  std::optional<TaskSpec> spec_;
  std::string scale_;
  std::unique_ptr<NamedProgram> reference_;
  ValueMix value_mix_;  // what every argument set mixes in, once the values request decided it
  // Why the reference has no float64 outputs, once a run found it (the same for every seed of the
  // task: a kernel of float only, a float64 run that does not fit): later runs are not tried again.
  std::string float64_unavailable_;
  // KernelBench's rule (LoadRequest::kernelbench_seed): each param's value for every call, on the
  // device, by the param's index; empty under crl's rule (fresh values per call).
  FixedParams fixed_params_;
  std::map<std::string, Outputs> outputs_;
  std::list<std::string> recently_used_;  // front: most recent
  int64_t cache_budget_bytes_ = int64_t{16} << 30;
  bool release_after_requests_ = false;  // MemoryShareRequest
  ArenaLayout layout_;    // of both arenas, from the arena request
  InputArena arena_;            // the candidate's inputs
  InputArena reference_arena_;  // the same timed inputs for the reference's own worker
  InputArena staging_arena_;    // CPU: timed inputs before their turn (no program worker maps it)
  void* output_region_ = nullptr;  // CPU backend: where the evaluator copies a candidate's outputs
  uint64_t output_region_bytes_ = 0;
  IpcImporter importer_;
  std::optional<KeptInputs> kept_inputs_;
  at::Tensor flush_buffer_;
  int64_t flush_counter_ = 0;
  static constexpr uint64_t kProbeNanoseconds = 100000;
  double probe_baseline_us_ = 0;
};

}  // namespace crl::worker
