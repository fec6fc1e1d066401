// Tensor metadata and references across processes: JSON forms, CUDA IPC export and import,
// memfd arenas and process_vm_readv (see exchange.h).
#include "worker/exchange.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

#if CRL_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include "compile/cuda_check.h"
#endif

namespace crl::worker {
namespace {

constexpr size_t kMaxDims = 8;
constexpr uint64_t kAlign = 256;

at::ScalarType dtype_from_name(const std::string& name) {
  for (auto t : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt, at::kLong, at::kShort, at::kChar,
                 at::kByte, at::kBool}) {
    if (name == c10::toString(t)) return t;
  }
  throw InputError("unknown dtype '" + name + "' in a tensor description");
}

#if CRL_HAVE_CUDA
std::string hex(const void* data, size_t bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

void unhex(const std::string& text, void* out, size_t bytes) {
  if (text.size() != 2 * bytes) throw InputError("an IPC handle has the wrong length");
  auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw InputError("an IPC handle is not hexadecimal");
  };
  auto* p = static_cast<unsigned char*>(out);
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(value(text[2 * i]) * 16 + value(text[2 * i + 1]));
}

// The extent of the allocation holding `pointer` (the driver's cuMemGetAddressRange, looked up at
// run time: linking libcuda would make every crl binary need a GPU driver to start).
bool allocation_range(void* pointer, uint64_t* base, uint64_t* size) {
  using Fn = int (*)(unsigned long long*, size_t*, unsigned long long);
  static Fn fn = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return lib == nullptr ? Fn{nullptr} : reinterpret_cast<Fn>(dlsym(lib, "cuMemGetAddressRange_v2"));
  }();
  if (fn == nullptr) return false;
  unsigned long long b = 0;
  size_t s = 0;
  if (fn(&b, &s, reinterpret_cast<unsigned long long>(pointer)) != 0) return false;
  *base = b;
  *size = s;
  return true;
}

// The driver's process-wide id of the allocation holding `pointer` (CU_POINTER_ATTRIBUTE_BUFFER_ID);
// 0 when the driver does not say.
uint64_t buffer_id(void* pointer) {
  using Fn = int (*)(void*, int, unsigned long long);
  static Fn fn = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return lib == nullptr ? Fn{nullptr} : reinterpret_cast<Fn>(dlsym(lib, "cuPointerGetAttribute"));
  }();
  constexpr int kBufferId = 7;  // CU_POINTER_ATTRIBUTE_BUFFER_ID (cuda.h)
  unsigned long long id = 0;
  if (fn == nullptr || fn(&id, kBufferId, reinterpret_cast<unsigned long long>(pointer)) != 0) return 0;
  return id;
}
#endif

}  // namespace

int64_t TensorMeta::nbytes() const {
  int64_t n = static_cast<int64_t>(c10::elementSize(dtype));
  for (int64_t s : sizes) n *= s;
  return n;
}

TensorMeta meta_of(const at::Tensor& tensor) { return {tensor.sizes().vec(), tensor.scalar_type()}; }

nlohmann::json to_json(const TensorMeta& meta) {
  return {{"sizes", meta.sizes}, {"dtype", std::string(c10::toString(meta.dtype))}};
}

TensorMeta tensor_meta_from_json(const nlohmann::json& json) {
  if (!json.is_object() || !json.contains("sizes") || !json["sizes"].is_array() || !json.contains("dtype") ||
      !json["dtype"].is_string()) {
    throw InputError("a tensor description needs sizes (array) and dtype (string)");
  }
  TensorMeta meta;
  if (json["sizes"].size() > kMaxDims) throw InputError("a tensor description has more than 8 dimensions");
  // Bounded so that nbytes() cannot overflow: 2^40 elements (a TiB of bytes) at most.
  double elements = 1;
  for (const auto& s : json["sizes"]) {
    if (!s.is_number_integer() || s.get<int64_t>() < 0) throw InputError("a tensor size is not a non-negative integer");
    meta.sizes.push_back(s.get<int64_t>());
    elements *= static_cast<double>(meta.sizes.back());
  }
  if (elements > static_cast<double>(int64_t{1} << 40)) throw InputError("a tensor description claims over 2^40 elements");
  meta.dtype = dtype_from_name(json["dtype"].get<std::string>());
  return meta;
}

std::string describe(const TensorMeta& meta) {
  return fmt::format("{} [{}]", c10::toString(meta.dtype), fmt::join(meta.sizes, ", "));
}

nlohmann::json to_json(const TensorRef& ref) {
  nlohmann::json j = to_json(ref.meta);
  j["device"] = ref.device;
  if (ref.device == "cuda") {
    j["ipc_handle"] = ref.ipc_handle;
    j["offset"] = ref.offset;
  } else {
    j["address"] = ref.address;
  }
  return j;
}

TensorRef tensor_ref_from_json(const nlohmann::json& json) {
  TensorRef ref;
  ref.meta = tensor_meta_from_json(json);
  if (!json.contains("device") || !json["device"].is_string()) throw InputError("a tensor reference has no device");
  ref.device = json["device"].get<std::string>();
  if (ref.device == "cuda") {
    if (!json.contains("ipc_handle") || !json["ipc_handle"].is_string() || !json.contains("offset") ||
        !json["offset"].is_number_unsigned()) {
      throw InputError("a CUDA tensor reference needs ipc_handle and offset");
    }
    ref.ipc_handle = json["ipc_handle"].get<std::string>();
    ref.offset = json["offset"].get<uint64_t>();
  } else if (ref.device == "cpu") {
    if (!json.contains("address") || !json["address"].is_number_unsigned()) {
      throw InputError("a CPU tensor reference needs an address");
    }
    ref.address = json["address"].get<uint64_t>();
  } else {
    throw InputError("a tensor reference's device must be cpu or cuda");
  }
  return ref;
}

std::vector<TensorRef> tensor_refs_from_json(const nlohmann::json& json, size_t max_count) {
  if (!json.is_array()) throw InputError("tensor references must be an array");
  if (json.size() > max_count) throw InputError(fmt::format("{} tensor references, at most {} expected", json.size(), max_count));
  std::vector<TensorRef> refs;
  for (const auto& j : json) refs.push_back(tensor_ref_from_json(j));
  return refs;
}

TensorRef export_tensor(const at::Tensor& tensor, at::Tensor* keep_alive, bool shareable) {
  TensorRef ref;
  ref.meta = meta_of(tensor);
  ref.device = tensor.is_cuda() ? "cuda" : "cpu";
  if (!tensor.is_contiguous()) throw Error("export_tensor needs a contiguous tensor");
  if (tensor.is_cpu()) {
    ref.address = reinterpret_cast<uint64_t>(tensor.data_ptr());
    *keep_alive = tensor;
    return ref;
  }
#if CRL_HAVE_CUDA
  at::Tensor held = tensor;
  size_t segment = 0;
  void* base = nullptr;
  try {
    base = held.numel() == 0 ? nullptr : c10::cuda::CUDACachingAllocator::getBaseAllocation(held.data_ptr(), &segment);
  } catch (const std::exception&) {
    base = nullptr;
  }
  if (base == nullptr) {
    // Memory the caching allocator did not hand out (or an empty tensor): copy it into a block that it did.
    held = tensor.clone();
    if (held.numel() == 0) held = at::empty({1}, tensor.options());
    base = c10::cuda::CUDACachingAllocator::getBaseAllocation(held.data_ptr(), &segment);
  }
  if (shareable) ref.ipc_handle = ipc_handle_of(base);
  ref.offset = static_cast<uint64_t>(static_cast<char*>(held.data_ptr()) - static_cast<char*>(base));
  *keep_alive = held;
  return ref;
#else
  throw Error("this build has no CUDA");
#endif
}

const std::string& ExportedAllocations::handle_of(void* base) {
#if CRL_HAVE_CUDA
  const uint64_t id = buffer_id(base);
  auto [known, added] = known_.try_emplace(base);
  if (added || id == 0 || known->second.buffer_id != id) {
    known->second = {id, ipc_handle_of(base)};
    ++exports_;
  }
  return known->second.handle;
#else
  (void)base;
  throw Error("this build has no CUDA");
#endif
}

nlohmann::json describe_batch(const std::vector<std::vector<at::Tensor>>& outputs_per_call, std::vector<at::Tensor>* held,
                              ExportedAllocations* exports) {
  nlohmann::json metas = nlohmann::json::array();
  nlohmann::json handles = nlohmann::json::array();
  nlohmann::json calls = nlohmann::json::array();
  std::unordered_map<std::string, size_t> index_of_handle;
  // Each allocation asked of `exports` once a batch (a driver call): a batch may hold hundreds of
  // outputs in a few segments, all alive while they are described.
  std::unordered_map<void*, std::string> handle_of_base;
  for (size_t c = 0; c < outputs_per_call.size(); ++c) {
    nlohmann::json places = nlohmann::json::array();
    for (const auto& out : outputs_per_call[c]) {
      at::Tensor keep;
      TensorRef ref = export_tensor(out.contiguous(), &keep, /*shareable=*/false);
      if (ref.device == "cuda" && exports != nullptr) {
        void* base = static_cast<char*>(keep.data_ptr()) - ref.offset;
        auto [known, added] = handle_of_base.try_emplace(base);
        if (added) known->second = exports->handle_of(base);
        ref.ipc_handle = known->second;
      }
      held->push_back(keep);
      if (c == 0) {
        nlohmann::json m = to_json(ref.meta);
        m["device"] = ref.device;
        metas.push_back(m);
      }
      if (ref.device == "cpu") {
        places.push_back(ref.address);
        continue;
      }
      const auto [found, added] = index_of_handle.try_emplace(ref.ipc_handle, handles.size());
      if (added) handles.push_back(ref.ipc_handle);
      places.push_back({found->second, ref.offset});
    }
    calls.push_back(places);
  }
  return {{"metas", metas}, {"handles", handles}, {"calls", calls}};
}

std::vector<TensorRef> batch_call_refs(const nlohmann::json& described, size_t call, size_t max_outputs) {
  if (!described.is_object() || !described.contains("metas") || !described.contains("handles") ||
      !described.contains("calls") || !described["calls"].is_array() || !described["metas"].is_array() ||
      !described["handles"].is_array()) {
    throw InputError("a timed batch's description needs metas, handles and calls");
  }
  const auto& metas = described["metas"];
  if (metas.size() > max_outputs) throw InputError(fmt::format("{} outputs described, at most {} expected", metas.size(), max_outputs));
  if (call >= described["calls"].size()) throw InputError(fmt::format("the description has no call {}", call));
  const auto& places = described["calls"][call];
  if (!places.is_array() || places.size() != metas.size()) throw InputError("a call's outputs do not match the metas");
  std::vector<TensorRef> refs;
  for (size_t i = 0; i < metas.size(); ++i) {
    TensorRef ref;
    ref.meta = tensor_meta_from_json(metas[i]);
    if (!metas[i].contains("device") || !metas[i]["device"].is_string()) throw InputError("an output meta has no device");
    ref.device = metas[i]["device"].get<std::string>();
    if (ref.device == "cpu") {
      if (!places[i].is_number_unsigned()) throw InputError("a CPU output's place is not an address");
      ref.address = places[i].get<uint64_t>();
    } else if (ref.device == "cuda") {
      if (!places[i].is_array() || places[i].size() != 2 || !places[i][0].is_number_unsigned() ||
          !places[i][1].is_number_unsigned() || places[i][0].get<uint64_t>() >= described["handles"].size() ||
          !described["handles"][places[i][0].get<size_t>()].is_string()) {
        throw InputError("a CUDA output's place is not [handle index, offset]");
      }
      ref.ipc_handle = described["handles"][places[i][0].get<size_t>()].get<std::string>();
      ref.offset = places[i][1].get<uint64_t>();
    } else {
      throw InputError("an output's device must be cpu or cuda");
    }
    refs.push_back(std::move(ref));
  }
  return refs;
}

std::string ipc_handle_of(void* allocation_base) {
#if CRL_HAVE_CUDA
  cudaIpcMemHandle_t handle;
  CRL_CUDA_CHECK(cudaIpcGetMemHandle(&handle, allocation_base));
  return hex(&handle, sizeof handle);
#else
  (void)allocation_base;
  throw Error("this build has no CUDA");
#endif
}

void* open_ipc_handle(const std::string& hex_handle) {
#if CRL_HAVE_CUDA
  cudaIpcMemHandle_t handle;
  unhex(hex_handle, &handle, sizeof handle);
  void* base = nullptr;
  if (cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return base;
#else
  (void)hex_handle;
  throw Error("this build has no CUDA");
#endif
}

uint64_t bytes_to_allocation_end(void* mapped) {
#if CRL_HAVE_CUDA
  uint64_t range_base = 0;
  uint64_t range_size = 0;
  if (!allocation_range(mapped, &range_base, &range_size)) return 0;
  const uint64_t start = reinterpret_cast<uint64_t>(mapped);
  return range_base + range_size > start ? range_base + range_size - start : 0;
#else
  (void)mapped;
  return 0;
#endif
}

IpcImporter::~IpcImporter() { close_all(); }

at::Tensor IpcImporter::import(const TensorRef& ref, int device_index) {
#if CRL_HAVE_CUDA
  if (ref.device != "cuda") throw InputError("not a CUDA tensor reference");
  const Mapping* found = nullptr;
  for (const auto& m : mappings_) {
    if (m.handle == ref.ipc_handle) found = &m;
  }
  if (found == nullptr) {
    void* base = open_ipc_handle(ref.ipc_handle);
    if (base == nullptr) throw InputError("the candidate's output handle does not open (not memory of its own process)");
    const uint64_t size = bytes_to_allocation_end(base);
    if (size == 0) {
      cudaIpcCloseMemHandle(base);
      throw InputError("the candidate's output allocation has no address range");
    }
    mappings_.push_back({ref.ipc_handle, base, size});
    found = &mappings_.back();
  }
  const uint64_t bytes = static_cast<uint64_t>(ref.meta.nbytes());
  if (ref.offset > found->size || bytes > found->size - ref.offset) {
    throw InputError(fmt::format("the candidate's output ({} bytes at offset {}) lies outside its allocation of {} bytes",
                                 bytes, ref.offset, found->size));
  }
  void* data = static_cast<char*>(found->base) + ref.offset;
  return at::from_blob(data, ref.meta.sizes, at::TensorOptions().dtype(ref.meta.dtype).device(at::kCUDA, device_index));
#else
  (void)ref;
  (void)device_index;
  throw Error("this build has no CUDA");
#endif
}

void IpcImporter::close_all() {
#if CRL_HAVE_CUDA
  for (const auto& m : mappings_) cudaIpcCloseMemHandle(m.base);
#endif
  mappings_.clear();
}

int create_shared_memory(const std::string& name, uint64_t bytes) {
  const int fd = memfd_create(name.c_str(), MFD_ALLOW_SEALING);  // inherited on purpose: no MFD_CLOEXEC
  if (fd < 0) throw_api_error("OS", "memfd_create", std::strerror(errno), __FILE__, __LINE__);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    throw Error(fmt::format("cannot size shared memory '{}' to {} bytes: {}", name, bytes, std::strerror(err)));
  }
  return fd;
}

void size_and_seal_shared_memory(int fd, uint64_t bytes, const std::string& what) {
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    throw Error(fmt::format("cannot size {} to {} bytes: {}", what, bytes, std::strerror(errno)));
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    throw Error(fmt::format("cannot seal the size of {}: {}", what, std::strerror(errno)));
  }
}

void* map_shared_memory(int fd, uint64_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw Error(fmt::format("cannot map {} ({} bytes): {}", what, bytes, std::strerror(errno)));
  return p;
}

void unmap_shared_memory(void* address, uint64_t bytes) {
  if (address != nullptr && bytes > 0) munmap(address, bytes);
}

void read_process_memory(pid_t pid, uint64_t address, uint64_t bytes, void* destination) {
  uint64_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<char*>(destination) + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(address + done), bytes - done};
    const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) {
      throw InputError(fmt::format("cannot read {} bytes at 0x{:x} in worker {}: {}", bytes, address, pid,
                                   n < 0 ? std::strerror(errno) : "nothing read"));
    }
    done += static_cast<uint64_t>(n);
  }
}

ArenaLayout arena_layout(const std::vector<TensorMeta>& arguments, int slots) {
  ArenaLayout layout;
  layout.arguments = arguments;
  layout.slots = slots;
  uint64_t offset = 0;
  for (const auto& a : arguments) {
    layout.offsets.push_back(offset);
    offset += (static_cast<uint64_t>(a.nbytes()) + kAlign - 1) / kAlign * kAlign;
  }
  layout.slot_bytes = std::max<uint64_t>(offset, kAlign);
  return layout;
}

nlohmann::json to_json(const ArenaLayout& layout) {
  nlohmann::json args = nlohmann::json::array();
  for (const auto& a : layout.arguments) args.push_back(to_json(a));
  return {{"arguments", args}, {"slots", layout.slots}};
}

ArenaLayout arena_layout_from_json(const nlohmann::json& json) {
  if (!json.is_object() || !json.contains("arguments") || !json["arguments"].is_array() || !json.contains("slots") ||
      !json["slots"].is_number_integer()) {
    throw InputError("an arena layout needs arguments and slots");
  }
  std::vector<TensorMeta> args;
  for (const auto& a : json["arguments"]) args.push_back(tensor_meta_from_json(a));
  const int slots = json["slots"].get<int>();
  if (slots < 1 || slots > 4096) throw InputError("an arena has 1 to 4096 slots");
  return arena_layout(args, slots);
}

std::vector<at::Tensor> arena_arguments(void* base, const ArenaLayout& layout, int slot, const at::Device& device) {
  if (slot < 0 || slot >= layout.slots) throw InputError(fmt::format("arena slot {} of {}", slot, layout.slots));
  std::vector<at::Tensor> args;
  char* slot_base = static_cast<char*>(base) + layout.slot_bytes * static_cast<uint64_t>(slot);
  for (size_t i = 0; i < layout.arguments.size(); ++i) {
    const auto& meta = layout.arguments[i];
    args.push_back(at::from_blob(slot_base + layout.offsets[i], meta.sizes,
                                 at::TensorOptions().dtype(meta.dtype).device(device)));
  }
  return args;
}

}  // namespace crl::worker
