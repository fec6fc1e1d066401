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
#include <vector>

#include "apps/crl-worker/worker_device.h"
#include "eval/exchange.h"
#include "eval/worker_channel.h"

namespace crl::worker {

class JudgeSession {
 public:
  JudgeSession();
  ~JudgeSession();
  eval::Message handle(const eval::Message& request);
  bool poisoned() const { return device_.poisoned(); }

 private:
  struct Outputs {
    uint64_t seed = 0;
    bool spread = false;
    bool edges = false;  // made from make_edge_arguments (an edge trial)
    std::vector<at::Tensor> tensors;  // empty once evicted: made again from the seed when asked for
    int64_t bytes = 0;
  };
  struct KeptInputs {  // a slot's inputs made again by check_inputs, for reference_slot next
    uint64_t seed = 0;
    std::vector<at::Tensor> tensors;
  };
  eval::Message load(const nlohmann::json& request);
  eval::Message reference(const nlohmann::json& request);
  eval::Message call_time(const nlohmann::json& request);
  eval::Message batch_copy(const nlohmann::json& request);
  eval::Message arena(const nlohmann::json& request);
  eval::Message adopt_arena(const nlohmann::json& request);
  InputArena& arena_named(const nlohmann::json& request);
  eval::Message fill(const nlohmann::json& request);
  eval::Message reference_slot(const nlohmann::json& request);
  eval::Message compare(const nlohmann::json& request);
  eval::Message check_inputs(const nlohmann::json& request);
  eval::Message probe(const nlohmann::json& request);
  eval::Message release(const nlohmann::json& request);
  eval::Message flush();

  std::vector<at::Tensor> arguments_for(uint64_t seed, bool spread, bool edges);
  const std::vector<at::Tensor>& outputs_for(const std::string& key);
  void keep(const std::string& key, Outputs outputs);
  void evict_to(int64_t budget);
  template <typename Make>
  auto reclaiming(Make make) -> decltype(make());
  double probe_once();

  WorkerDevice device_;
  std::optional<TaskSpec> spec_;
  std::string scale_;
  std::unique_ptr<NamedProgram> reference_;
  std::map<std::string, Outputs> outputs_;
  std::list<std::string> recently_used_;  // front: most recent
  int64_t cache_budget_bytes_ = int64_t{16} << 30;
  eval::ArenaLayout layout_;    // of both arenas, from the arena request
  InputArena arena_;            // the candidate's inputs
  InputArena reference_arena_;  // the same timed inputs for the reference's own worker
  void* output_region_ = nullptr;  // CPU backend: where the evaluator copies a candidate's outputs
  uint64_t output_region_bytes_ = 0;
  eval::IpcImporter importer_;
  std::optional<KeptInputs> kept_inputs_;
  at::Tensor flush_buffer_;
  int64_t flush_counter_ = 0;
  static constexpr uint64_t kProbeNanoseconds = 100000;
  double probe_baseline_us_ = 0;
};

}  // namespace crl::worker
