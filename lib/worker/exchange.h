// How tensors cross between the judge, the evaluator and a candidate worker without the host pipe:
// the candidate's inputs in an arena the judge fills (a memfd on the CPU; on the GPU the worker's
// own allocation, which the judge imports through CUDA IPC), and its outputs described by TensorRefs that the judge reads where they are (CUDA IPC)
// or that the evaluator copies out of the frozen worker (process_vm_readv) on the CPU.
#pragma once

#include <ATen/Tensor.h>
#include <nlohmann/json.hpp>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace crl::worker {

// The shape and type of one tensor: what the judge checks a candidate's output against before it
// reads or allocates anything.
struct TensorMeta {
  std::vector<int64_t> sizes;
  at::ScalarType dtype = at::kFloat;
  int64_t nbytes() const;
  bool operator==(const TensorMeta& other) const { return sizes == other.sizes && dtype == other.dtype; }
};
TensorMeta meta_of(const at::Tensor& tensor);
nlohmann::json to_json(const TensorMeta& meta);
TensorMeta tensor_meta_from_json(const nlohmann::json& json);  // InputError on a malformed one
std::string describe(const TensorMeta& meta);                    // "float32 [4, 16]"

// A contiguous tensor in another process. CPU: its address there. CUDA: the IPC handle of the
// allocation that holds it and its byte offset in that allocation.
struct TensorRef {
  TensorMeta meta;
  std::string device;        // "cpu" or "cuda": where the program returned it
  uint64_t address = 0;      // cpu
  std::string ipc_handle;    // cuda: cudaIpcMemHandle_t as hex
  uint64_t offset = 0;       // cuda
};
nlohmann::json to_json(const TensorRef& ref);
TensorRef tensor_ref_from_json(const nlohmann::json& json);  // InputError on a malformed one
std::vector<TensorRef> tensor_refs_from_json(const nlohmann::json& json, size_t max_count);

// Describes `tensor` (made contiguous by the caller) for another process: on CUDA the handle of
// its caching-allocator segment; a tensor outside it is copied into one first (the copy is
// returned through *keep_alive, which the caller holds until the reader is done).
// shareable = false describes it without exporting its allocation (ipc_handle left empty): for
// memory no other process is to open (below), or whose export a caller keeps (describe_batch).
TensorRef export_tensor(const at::Tensor& tensor, at::Tensor* keep_alive, bool shareable = true);

// The IPC handles of the allocations a candidate's worker has exported, kept from one timed batch to
// the next. Exporting inside the timed request cost the candidate ~75 us a batch of 16 outputs on an
// H100 (its describe step 123 us against the reference's 48), which the reference's worker, exporting
// nothing, never paid. Kept, a batch whose outputs lie in allocations already exported pays one
// driver lookup (the buffer id) per allocation (54 us against the reference's 37 on the H100). An
// allocation is known by its base and the driver's buffer id (unique per allocation in a process),
// so memory freed and made again at the same address (the caching allocator's retry after an
// out-of-memory, an emptied cache) is exported anew, never described by a stale handle.
class ExportedAllocations {
 public:
  // `base`'s handle as hex (ipc_handle_of), exported at its first sight.
  const std::string& handle_of(void* base);
  void clear() { known_.clear(); }
  size_t exported() const { return exports_; }  // driver exports so far (tests)

 private:
  struct Known {
    uint64_t buffer_id = 0;
    std::string handle;
  };
  std::unordered_map<void*, Known> known_;
  size_t exports_ = 0;
};

// The outputs of a timed batch, described compactly (the description is built inside the timed
// window, by the judge for the reference exactly as by the worker for the candidate): the first
// call's output metas and devices once, the distinct CUDA IPC handles once, then per call the
// CPU address or the (handle index, offset) of each output. *held keeps the memory valid.
// exports == nullptr (the reference's timing worker, whose outputs the judge never reads: it
// compares with its own): the same description, but without the CUDA IPC export of the outputs'
// allocations, which another process could open with a handle it learnt or guessed (a candidate
// copying the reference's outputs of the same inputs: docs/evaluation.md, "Threat model"). The
// candidate's worker exports each allocation once (ExportedAllocations), not in every batch.
nlohmann::json describe_batch(const std::vector<std::vector<at::Tensor>>& outputs_per_call, std::vector<at::Tensor>* held,
                              ExportedAllocations* exports);
// Call `call`'s outputs of such a description as TensorRefs (validated; bounded by max_outputs).
std::vector<TensorRef> batch_call_refs(const nlohmann::json& described, size_t call, size_t max_outputs);

// A CUDA allocation's IPC handle as hex (what crosses the channel), and the mapping of one in this
// process (nullptr when it does not open); one encoding for outputs and the input arena alike.
std::string ipc_handle_of(void* allocation_base);
void* open_ipc_handle(const std::string& hex_handle);
// The bytes from `mapped` (an address an IPC handle opened at) to the end of the allocation that
// holds it; 0 when the driver does not say.
uint64_t bytes_to_allocation_end(void* mapped);

// Opens CUDA IPC handles (each once: CUDA counts a handle opened again, and each open needs its close) and wraps a
// TensorRef as a tensor over the other process's memory, after checking that the referenced
// bytes lie inside the allocation. close_all() unmaps everything (a worker that ended).
class IpcImporter {
 public:
  IpcImporter() = default;
  ~IpcImporter();
  IpcImporter(const IpcImporter&) = delete;
  IpcImporter& operator=(const IpcImporter&) = delete;
  at::Tensor import(const TensorRef& ref, int device_index);
  void close_all();

 private:
  struct Mapping {
    std::string handle;
    void* base = nullptr;
    uint64_t size = 0;
  };
  std::vector<Mapping> mappings_;
};

// A memfd of `bytes` bytes (MAP_SHARED by whoever inherits it), named for /proc listings.
int create_shared_memory(const std::string& name, uint64_t bytes);
// Sizes a memfd of create_shared_memory to `bytes` and seals its size: a worker that inherits it
// cannot shrink it under the processes that map it (their next access would be a SIGBUS) or grow it.
void size_and_seal_shared_memory(int fd, uint64_t bytes, const std::string& what);
// Maps `bytes` of shared memory fd read-write; munmap with unmap_shared_memory.
void* map_shared_memory(int fd, uint64_t bytes, const std::string& what);
void unmap_shared_memory(void* address, uint64_t bytes);

// Copies `bytes` bytes at `address` in process `pid` (stopped, and a child of the caller) into
// `destination`. Throws InputError when the range is not readable there (a reference that lies).
void read_process_memory(pid_t pid, uint64_t address, uint64_t bytes, void* destination);

// The page of a timed batch's turns at the end of a CPU arena (call_turns.h's TurnPage).
constexpr uint64_t kTurnPageBytes = 4096;

// Where arguments lie in one arena slot: offsets aligned to 256 bytes.
struct ArenaLayout {
  std::vector<TensorMeta> arguments;
  std::vector<uint64_t> offsets;
  uint64_t slot_bytes = 0;
  int slots = 0;
  uint64_t total_bytes() const { return slot_bytes * static_cast<uint64_t>(slots); }
  // CPU: the arena's memfd holds, after the slots, the page of the batch's turns (call_turns.h).
  uint64_t turn_page_offset() const { return (total_bytes() + kTurnPageBytes - 1) / kTurnPageBytes * kTurnPageBytes; }
  uint64_t shared_bytes() const { return turn_page_offset() + kTurnPageBytes; }
};
ArenaLayout arena_layout(const std::vector<TensorMeta>& arguments, int slots);
nlohmann::json to_json(const ArenaLayout& layout);
ArenaLayout arena_layout_from_json(const nlohmann::json& json);
// The arguments of slot `slot` as tensors over the arena at `base` (no copies, no ownership).
std::vector<at::Tensor> arena_arguments(void* base, const ArenaLayout& layout, int slot, const at::Device& device);

}  // namespace crl::worker
