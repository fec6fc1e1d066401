// What both roles of crl-worker share: the device (CPU or one CUDA GPU) with its sticky-error
// check, a loaded program library with its role, and the input arena the judge fills.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compile/loaded_program.h"
#include "pyprogram/python_program.h"
#include "worker/call_turns.h"
#include "worker/exchange.h"
#include "worker/protocol.h"
#include "program/task_spec.h"

namespace crl::worker {

// The fd numbers a worker inherits: the channel (3 requests, 4 replies), then its input arena (5,
// CPU backend) and, for the judge only, the region where the evaluator puts a candidate's outputs
// (6), the reference's timing worker's arena (7; that worker maps it as its own 5) and the staging
// arena (8) where timed inputs wait for their turn (call_turns.h), which no program worker maps.
constexpr int kRequestFd = 3;
constexpr int kReplyFd = 4;
constexpr int kArenaFd = 5;
constexpr int kOutputRegionFd = 6;
constexpr int kReferenceArenaFd = 7;
constexpr int kStagingArenaFd = 8;

class WorkerDevice {
 public:
  // The load request's device, memory cap and intra-op threads; applies crl's ATen run settings.
  void init(const DeviceSettings& settings);
  const at::Device& device() const { return device_; }
  bool is_cuda() const { return device_.is_cuda(); }
  // Waits for the whole device and throws when it reports an error; a sticky error poisons it.
  void check(const std::string& after);
  void synchronize();
  // Waits for the device, then hands the caching allocator's unused blocks back to the driver, so
  // that two workers start their timed batches from the same allocator state.
  void release_cached_memory();
  bool poisoned() const { return poisoned_; }
  // This process's share of the GPU's memory holds `bytes` allocated outside the caching allocator
  // (the input arena, cudaMalloc'd): the allocator's cap shrinks by as much, so that the arena and
  // the allocator together stay within the share the evaluator gave.
  void hold_outside_allocator(uint64_t bytes);
  // The evaluator's memory plan changed this process's share (of the card, arena included).
  void set_share(double fraction);
  // The caching allocator's bytes in tensors now, and its peak since reset_peak (0 on the CPU).
  int64_t allocated_bytes() const;
  int64_t peak_allocated_bytes() const;
  void reset_peak();
  int64_t card_bytes() const;  // the GPU's memory (0 on the CPU)
  // For an out-of-memory failure: whether the GPU ran short while this process was still within
  // its share (the other processes of the evaluation took more than theirs: crl's budget, not the
  // program, failed), with a sentence saying what was seen. False on the CPU or without a cap.
  bool device_ran_short(std::string* seen) const;
  // The minor number of this worker's GPU's device node (/dev/nvidia<minor>), from the NVIDIA
  // driver's /proc/driver/nvidia/gpus/<PCI bus id>/information; -1 when not known (the CPU, or a
  // driver that does not say): the sandbox then keeps every GPU's node.
  int gpu_minor() const;
  // One tiny operation queued on the GPU (a 4-byte memset on the current stream; nothing on the
  // CPU). A timed batch starts with it, the empty one too: the GPU's switch from the judge's context
  // to this process's (~150-400 us on the H200) is then paid in the empty batch that is subtracted,
  // not only by the first call of a real one.
  void touch();
  // A small computation on the GPU, read back (for `crl-worker --probe-cuda --worker-order`: that
  // the device still works once the whole sandbox is on). Returns what it computed; throws when the
  // device fails or computes wrong.
  std::string self_check();

 private:
  at::Device device_{at::kCPU};
  bool poisoned_ = false;
  void* touch_buffer_ = nullptr;  // cudaMalloc'd once, 4 bytes
  double share_ = 0;               // of the GPU's memory, arena included; 0: no cap
  uint64_t outside_allocator_ = 0; // bytes of the share held outside the caching allocator
};

// A program and its role in messages: a compiled library (lib/compile checks its ABI) or a
// KernelBench-format module in the embedded Python (lib/pyprogram).
class NamedProgram {
 public:
  using Forward = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;
  NamedProgram(std::string which, const std::string& path);
  NamedProgram(std::string which, std::shared_ptr<pyprogram::PythonProgram> program);
  // Never unloaded before the worker exits: a program's static destructors or threads could still run.
  std::vector<at::Tensor> operator()(const std::vector<at::Tensor>& args) const;
  const std::string& which() const { return which_; }

 private:
  std::string which_;
  std::shared_ptr<void> program_;  // what forward_ calls
  Forward forward_;
};

// CUDA events made ahead of the timed requests that record into them (none on the CPU).
class EventPool {
 public:
  EventPool() = default;
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  void reserve(const WorkerDevice& device, size_t count);
  size_t size() const { return events_.size(); }
  void* at(size_t i) const { return events_[i]; }  // a cudaEvent_t

 private:
  std::vector<void*> events_;
};

// A timed batch's calls as its worker sees them: after construction (the batch's start), call
// after_call() once per call; the pool's CUDA events are recorded after the first call and the
// last only, so nothing is added between the calls. A diagnostic only: a program's worker could
// fake it, so the evaluator reports the reference worker's beside its own clock and never measures
// by it.
class BatchTimeline {
 public:
  BatchTimeline(const EventPool& events, size_t calls);
  void after_call();
  // Waits for the stream. first_call_host_us and, on the GPU, first_call_device_us; with more than
  // one call, the later calls' means (later_call_host_us, later_call_device_us).
  BatchTimelineSummary summary() const;

 private:
  void mark();
  const EventPool& events_;
  size_t calls_ = 0, done_ = 0;
  size_t recorded_ = 0;            // events of the pool recorded: the start, then one per mark
  std::vector<double> host_us_;    // host time of each interval between marks
  std::chrono::steady_clock::time_point last_;
};

// Runs `program` and waits for the device (a sticky error explains a failure better than forward's).
std::vector<at::Tensor> call_and_check(WorkerDevice& device, const NamedProgram& program,
                                       const std::vector<at::Tensor>& args);

// The task spec of a load request (reference_program: the task's .crl file) at its scale.
TaskSpec load_spec(const LoadRequest& request, std::string* scale);

// Whether an error is the device running out of memory. The reference is crl's own code, so its
// out-of-memory errors (the caching allocator's, or ATen's reached through the program's forward,
// which reports them as text) can be recognised by their words.
bool is_out_of_memory(const std::exception& e);

// An input arena as mapped in this process. CPU: a memfd the evaluator made, which the judge and
// the worker both map. GPU: the worker's own allocation (cudaMalloc there), which the judge imports
// by its IPC handle to fill and check it: the program's timed kernels then read memory of their own
// process (inputs imported from another process made level2/010's convolution 2.1x slower, so a
// candidate that copied its inputs first was judged 1.86x faster).
class InputArena {
 public:
  InputArena() = default;
  ~InputArena();
  InputArena(const InputArena&) = delete;
  InputArena& operator=(const InputArena&) = delete;
  // CPU: maps the memfd at `fd` (the evaluator sized and sealed it), the turn page with it.
  void map_shared(const ArenaLayout& layout, int fd);
  // GPU, the worker whose program reads it: allocates it here; ipc_handle() exports it.
  void allocate(const ArenaLayout& layout, const at::Device& device);
  // GPU, the judge: maps a worker's allocation. InputError when the handle does not open, opens
  // less than the layout's bytes, or opens memory this process already maps as `other` (a handle
  // of another program's arena: the judge would then fill and check that one instead).
  void import(const ArenaLayout& layout, const at::Device& device, const std::string& ipc_handle,
              const InputArena* other = nullptr);
  void release();
  std::vector<at::Tensor> arguments(int slot) const;
  const ArenaLayout& layout() const { return layout_; }
  std::string ipc_handle() const { return ipc_handle_; }
  bool ready() const { return base_ != nullptr; }
  // CPU: the page of the timed batch's turns (nullptr on the GPU, where batches have no turns).
  TurnPage* turn_page() const;

 private:
  ArenaLayout layout_;
  at::Device device_{at::kCPU};
  void* base_ = nullptr;
  bool owned_cuda_ = false;
  bool imported_cuda_ = false;
  bool mapped_shared_ = false;
  std::string ipc_handle_;
};

// A reply's list of tensors as TensorRefs; the tensors are appended to *held so the memory stays
// valid until the reader is done.
std::vector<TensorRef> export_outputs(const std::vector<at::Tensor>& outputs, std::vector<at::Tensor>* held);

}  // namespace crl::worker
