// The device, program and arena layer shared by the judge and the candidate roles of crl-worker.
#include "worker/worker_device.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "program/program_text.h"
#include "program/run_settings.h"

#if CRL_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime.h>
#endif

namespace crl::worker {

void WorkerDevice::init(const DeviceSettings& settings) {
  apply_program_run_settings(parse_precision(settings.precision));
  if (settings.cpu_threads > 0) at::set_num_threads(settings.cpu_threads);
  const std::string& device = settings.device;
  if (device == "cuda") {
#if CRL_HAVE_CUDA
    device_ = at::Device(at::kCUDA, 0);
    // A first allocation initialises CUDA and the caching allocator, which the cap applies to.
    at::empty({1}, at::TensorOptions().device(device_));
    share_ = settings.gpu_memory_fraction;
    hold_outside_allocator(0);
#else
    throw InputError("this crl-worker was built without CUDA");
#endif
  } else if (device != "cpu") {
    throw InputError("device must be cpu or cuda, not '" + device + "'");
  }
}

void WorkerDevice::hold_outside_allocator(uint64_t bytes) {
  outside_allocator_ = bytes;
#if CRL_HAVE_CUDA
  if (!device_.is_cuda() || share_ <= 0) return;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess || total_bytes == 0) {
    cudaGetLastError();
    c10::cuda::CUDACachingAllocator::setMemoryFraction(share_, 0);
    return;
  }
  const double outside = static_cast<double>(bytes) / static_cast<double>(total_bytes);
  // (a cap of 0 would refuse every allocation; the arena alone filling the share fails later, as
  // the program's first allocation, naming the share)
  c10::cuda::CUDACachingAllocator::setMemoryFraction(std::max(share_ - outside, 0.001), 0);
#endif
}

void WorkerDevice::set_share(double fraction) {
  if (!(fraction > 0 && fraction <= 1)) throw InputError(fmt::format("a GPU memory share must lie in (0, 1], not {}", fraction));
  share_ = fraction;
  hold_outside_allocator(outside_allocator_);
}

int64_t WorkerDevice::allocated_bytes() const {
#if CRL_HAVE_CUDA
  if (device_.is_cuda()) return c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].current;
#endif
  return 0;
}

int64_t WorkerDevice::peak_allocated_bytes() const {
#if CRL_HAVE_CUDA
  if (device_.is_cuda()) return c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].peak;
#endif
  return 0;
}

void WorkerDevice::reset_peak() {
#if CRL_HAVE_CUDA
  if (device_.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(0);
#endif
}

int64_t WorkerDevice::card_bytes() const {
#if CRL_HAVE_CUDA
  size_t free_bytes = 0, total_bytes = 0;
  if (device_.is_cuda() && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) return static_cast<int64_t>(total_bytes);
  cudaGetLastError();
#endif
  return 0;
}

bool WorkerDevice::device_ran_short(std::string* seen) const {
#if CRL_HAVE_CUDA
  if (!device_.is_cuda() || share_ <= 0) return false;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  const auto reserved = static_cast<uint64_t>(stats.reserved_bytes[0].current);
  const auto share = static_cast<uint64_t>(share_ * static_cast<double>(total_bytes));
  const uint64_t used = reserved + outside_allocator_;
  const uint64_t left_in_share = share > used ? share - used : 0;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  *seen = fmt::format("this worker held {:.2f} GiB of its {:.2f} GiB share ({:.0f}% of the GPU), the GPU had {:.2f} GiB free",
                      static_cast<double>(used) / kGiB, static_cast<double>(share) / kGiB, 100 * share_,
                      static_cast<double>(free_bytes) / kGiB);
  // Short: what the share still promised was not there (with 1% of the card as slack for the
  // allocator's rounding and the context's own growth).
  return free_bytes + total_bytes / 100 < left_in_share;
#else
  (void)seen;
  return false;
#endif
}

std::string WorkerDevice::self_check() {
  if (!device_.is_cuda()) throw Error("self_check: this worker's device is not a GPU");
  // A fresh allocation, a kernel, a reduction and a copy back: the paths a program's call takes.
  const at::Tensor x = at::arange(1, 1025, at::TensorOptions().dtype(at::kFloat).device(device_));
  const double sum = x.mul(2).sum().item<double>();
  if (sum != 1024.0 * 1025.0) throw Error(fmt::format("self_check: the GPU computed {} for 2 * (1 + ... + 1024), not 1049600", sum));
  return fmt::format("2 * (1 + ... + 1024) = {:.0f} on {}", sum, device_.str());
}

int WorkerDevice::gpu_minor() const {
#if CRL_HAVE_CUDA
  if (!device_.is_cuda()) return -1;
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device_.index()) != cudaSuccess) return -1;
  std::string wanted = bus;
  std::transform(wanted.begin(), wanted.end(), wanted.begin(), [](unsigned char c) { return std::tolower(c); });
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    std::string name = entry.path().filename().string();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    if (name != wanted) continue;
    std::ifstream information(entry.path() / "information");
    std::string line;
    while (std::getline(information, line)) {
      if (line.rfind("Device Minor:", 0) != 0) continue;
      const std::string digits = line.substr(line.find(':') + 1);
      char* end = nullptr;
      const long minor = std::strtol(digits.c_str(), &end, 10);
      return end != digits.c_str() && minor >= 0 && minor < 4096 ? static_cast<int>(minor) : -1;
    }
  }
#endif
  return -1;
}

void WorkerDevice::synchronize() {
#if CRL_HAVE_CUDA
  if (device_.is_cuda()) cudaDeviceSynchronize();
#endif
}

void WorkerDevice::touch() {
#if CRL_HAVE_CUDA
  if (!device_.is_cuda()) return;
  if (touch_buffer_ == nullptr && cudaMalloc(&touch_buffer_, 4) != cudaSuccess) {
    touch_buffer_ = nullptr;
    throw Error("cudaMalloc of 4 bytes failed");
  }
  if (cudaMemsetAsync(touch_buffer_, 0, 4, at::cuda::getCurrentCUDAStream()) != cudaSuccess) throw Error("cudaMemsetAsync failed");
#endif
}

EventPool::~EventPool() {
#if CRL_HAVE_CUDA
  for (void* e : events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
#endif
}

void EventPool::reserve(const WorkerDevice& device, size_t count) {
#if CRL_HAVE_CUDA
  while (device.is_cuda() && events_.size() < count) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) throw Error("cudaEventCreate failed");
    events_.push_back(e);
  }
#else
  (void)device;
  (void)count;
#endif
}

BatchTimeline::BatchTimeline(const EventPool& events, size_t calls)
    : events_(events), calls_(calls), last_(std::chrono::steady_clock::now()) {
#if CRL_HAVE_CUDA
  if (events_.size() > 0) cudaEventRecord(static_cast<cudaEvent_t>(events_.at(recorded_++)), at::cuda::getCurrentCUDAStream());
#endif
}

void BatchTimeline::after_call() {
  ++done_;
  if (done_ == 1 || done_ == calls_) mark();
}

void BatchTimeline::mark() {
  const auto now = std::chrono::steady_clock::now();
  host_us_.push_back(std::chrono::duration<double, std::micro>(now - last_).count());
  last_ = now;
#if CRL_HAVE_CUDA
  if (recorded_ > 0 && recorded_ < events_.size()) {
    cudaEventRecord(static_cast<cudaEvent_t>(events_.at(recorded_++)), at::cuda::getCurrentCUDAStream());
  }
#endif
}

BatchTimelineSummary BatchTimeline::summary() const {
  BatchTimelineSummary j;
  if (host_us_.empty()) return j;
  std::vector<double> device_us;  // the GPU time of each interval between marks
#if CRL_HAVE_CUDA
  if (recorded_ > 1 && cudaEventSynchronize(static_cast<cudaEvent_t>(events_.at(recorded_ - 1))) == cudaSuccess) {
    for (size_t i = 1; i < recorded_; ++i) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(events_.at(i - 1)), static_cast<cudaEvent_t>(events_.at(i))) != cudaSuccess) {
        device_us.clear();
        break;
      }
      device_us.push_back(1e3 * ms);
    }
  }
#endif
  j.first_call_host_us = host_us_[0];
  if (!device_us.empty()) j.first_call_device_us = device_us[0];
  if (calls_ > 1 && host_us_.size() > 1) {
    const double later = static_cast<double>(calls_ - 1);
    j.later_call_host_us = host_us_[1] / later;
    if (device_us.size() > 1) j.later_call_device_us = device_us[1] / later;
  }
  return j;
}

void WorkerDevice::release_cached_memory() {
  synchronize();
#if CRL_HAVE_CUDA
  if (device_.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

void WorkerDevice::check(const std::string& after) {
#if CRL_HAVE_CUDA
  if (!device_.is_cuda()) return;
  cudaError_t err = cudaDeviceSynchronize();
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err == cudaSuccess) return;
  // Errors that leave the context unusable: the worker must go after this reply.
  poisoned_ = err == cudaErrorIllegalAddress || err == cudaErrorLaunchFailure || err == cudaErrorMisalignedAddress ||
              err == cudaErrorIllegalInstruction || err == cudaErrorHardwareStackError ||
              err == cudaErrorInvalidAddressSpace || err == cudaErrorInvalidPc || err == cudaErrorAssert ||
              err == cudaErrorLaunchTimeout || err == cudaErrorECCUncorrectable;
  throw Error(fmt::format("CUDA error after {}: {} ({}){}", after, cudaGetErrorString(err), cudaGetErrorName(err),
                          poisoned_ ? "; the device context is lost" : ""));
#else
  (void)after;
#endif
}

NamedProgram::NamedProgram(std::string which, const std::string& path) : which_(std::move(which)) {
  auto library = std::make_shared<LoadedProgram>(path);
  forward_ = [p = library.get()](const std::vector<at::Tensor>& args) { return p->forward(args); };
  program_ = std::move(library);
}

NamedProgram::NamedProgram(std::string which, std::shared_ptr<pyprogram::PythonProgram> program) : which_(std::move(which)) {
  forward_ = [p = program.get()](const std::vector<at::Tensor>& args) { return p->forward(args); };
  program_ = std::move(program);
}

std::vector<at::Tensor> NamedProgram::operator()(const std::vector<at::Tensor>& args) const {
  try {
    return forward_(args);
  } catch (const Error& e) {
    throw Error("the " + which_ + "'s forward failed: " + e.what());
  }
}

std::vector<at::Tensor> call_and_check(WorkerDevice& device, const NamedProgram& program,
                                       const std::vector<at::Tensor>& args) {
  std::vector<at::Tensor> outputs;
  try {
    outputs = program(args);
  } catch (const std::exception&) {
    device.check(program.which() + "'s forward");
    throw;
  }
  device.check(program.which() + "'s forward");
  for (const auto& out : outputs) {
    if (!out.defined()) throw Error("the " + program.which() + " returned an undefined tensor");
  }
  return outputs;
}

bool is_out_of_memory(const std::exception& e) { return std::string_view(e.what()).find("out of memory") != std::string_view::npos; }

TaskSpec load_spec(const LoadRequest& request, std::string* scale) {
  const std::string& reference_program = request.reference_program;
  TaskSpec spec = parse_task_spec(load_program_file(reference_program).spec, reference_program);
  *scale = request.scale;
  spec.scale_variables(*scale);  // throws for an unknown scale
  return spec;
}

InputArena::~InputArena() { release(); }

void InputArena::release() {
#if CRL_HAVE_CUDA
  if (owned_cuda_ && base_ != nullptr) cudaFree(base_);
  if (imported_cuda_ && base_ != nullptr) cudaIpcCloseMemHandle(base_);
#endif
  if (mapped_shared_) unmap_shared_memory(base_, layout_.shared_bytes());
  base_ = nullptr;
  owned_cuda_ = imported_cuda_ = mapped_shared_ = false;
  ipc_handle_.clear();
}

void InputArena::map_shared(const ArenaLayout& layout, int fd) {
  release();
  layout_ = layout;
  device_ = at::Device(at::kCPU);
  base_ = map_shared_memory(fd, layout.shared_bytes(), "an input arena");
  mapped_shared_ = true;
}

TurnPage* InputArena::turn_page() const {
  if (!mapped_shared_) return nullptr;
  return reinterpret_cast<TurnPage*>(static_cast<char*>(base_) + layout_.turn_page_offset());
}

void InputArena::allocate(const ArenaLayout& layout, const at::Device& device) {
  release();
  layout_ = layout;
  device_ = device;
#if CRL_HAVE_CUDA
  if (cudaMalloc(&base_, layout.total_bytes()) != cudaSuccess) {
    cudaGetLastError();
    base_ = nullptr;
    throw Error(fmt::format("cannot allocate an input arena ({} bytes) on the GPU", layout.total_bytes()));
  }
  owned_cuda_ = true;
  ipc_handle_ = ipc_handle_of(base_);
#else
  throw Error("this build has no CUDA");
#endif
}

void InputArena::import(const ArenaLayout& layout, const at::Device& device, const std::string& ipc_handle,
                        const InputArena* other) {
  release();
#if CRL_HAVE_CUDA
  void* base = open_ipc_handle(ipc_handle);  // (InputError for a handle that is not hexadecimal)
  if (base == nullptr) throw InputError("the worker's input arena handle does not open (CUDA IPC)");
  const uint64_t bytes = bytes_to_allocation_end(base);
  if (bytes < layout.total_bytes() || (other != nullptr && other->base_ == base)) {
    // (a handle opened again returns the mapping it already has and counts it: closing undoes just this one)
    cudaIpcCloseMemHandle(base);
    throw InputError(bytes < layout.total_bytes()
                         ? fmt::format("the worker's input arena holds {} bytes, the layout needs {}", bytes, layout.total_bytes())
                         : std::string("the worker's input arena handle opens another program's arena"));
  }
  layout_ = layout;
  device_ = device;
  base_ = base;
  imported_cuda_ = true;
#else
  (void)layout;
  (void)device;
  (void)ipc_handle;
  (void)other;
  throw Error("this build has no CUDA");
#endif
}

std::vector<at::Tensor> InputArena::arguments(int slot) const {
  if (base_ == nullptr) throw InputError("the input arena is not mapped yet");
  return arena_arguments(base_, layout_, slot, device_);
}

std::vector<TensorRef> export_outputs(const std::vector<at::Tensor>& outputs, std::vector<at::Tensor>* held) {
  std::vector<TensorRef> refs;
  for (const auto& out : outputs) {
    at::Tensor keep;
    refs.push_back(export_tensor(out.contiguous(), &keep));
    held->push_back(keep);
  }
  return refs;
}

}  // namespace crl::worker
