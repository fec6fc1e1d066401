// Worker-side hack-guard probes (see guard_probe.h and docs/hack-guards.md).
#include "worker/guard_probe.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "core/error.h"
#include "core/process_env.h"
#include "worker/output_comparison.h"
#include "program/arguments.h"
#include "program/value_mix.h"

#if CRL_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime.h>
#endif

namespace crl::worker {
namespace {

void synchronize_device(const at::Device& device) {
#if CRL_HAVE_CUDA
  if (device.is_cuda()) cudaDeviceSynchronize();
#else
  (void)device;
#endif
}

// What the caller can see when forward returns: on CUDA, the current stream's work is done.
void synchronize_current_stream(const at::Device& device) {
#if CRL_HAVE_CUDA
  if (device.is_cuda()) at::cuda::getCurrentCUDAStream().synchronize();
#else
  (void)device;
#endif
}

// Copies to compare with later. A GPU tensor over 1 GiB is copied to the host: at full scale the
// worker's share of the card holds its arena and the held outputs, not two more copies of them
// (same_bytes compares a GPU tensor with its host copy in chunks).
std::vector<at::Tensor> snapshot_all(const std::vector<at::Tensor>& tensors) {
  constexpr int64_t kOnDeviceAtMost = int64_t{1} << 30;
  std::vector<at::Tensor> copies;
  for (const auto& t : tensors) {
    if (!t.defined()) {
      copies.push_back(t);
    } else if (t.is_cuda() && t.numel() * static_cast<int64_t>(t.element_size()) > kOnDeviceAtMost) {
      copies.push_back(t.to(at::kCPU));
    } else {
      copies.push_back(t.clone());
    }
  }
  return copies;
}


// Fills the allocator's free memory with NaN bytes (0xFF): blocks of each output's size and a
// large one are allocated, filled and freed, so an output the candidate allocates but never
// writes holds NaN instead of whatever an earlier call left there.
void poison_free_memory(const std::vector<int64_t>& output_bytes, const at::Device& device) {
#if CRL_HAVE_CUDA
  // The caching allocator's free blocks go back to the driver first: otherwise an unpoisoned block
  // (an earlier trial's output, still holding a correct result) could serve the next allocation.
  // The poisoned blocks below then are the only cached ones of the outputs' sizes.
  if (device.is_cuda()) {
    synchronize_device(device);
    c10::cuda::CUDACachingAllocator::emptyCache();
  }
#endif
  std::vector<at::Tensor> blocks;
  const auto options = at::TensorOptions().dtype(at::kByte).device(device);
  int64_t total = 0;
  for (int64_t b : output_bytes) total += b;
  // Four blocks of each output's size and one of four times their total: eight times the outputs,
  // which at full scale (a 7 GB output) is more than the worker may hold beside its arguments. The
  // copies shrink to what a quarter of the free memory allows, down to one block of each size
  // (enough: the allocator hands the same-size block it freed last to the next such request).
  int64_t budget = int64_t{1} << 62;
#if CRL_HAVE_CUDA
  if (device.is_cuda()) {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) budget = static_cast<int64_t>(free_bytes / 4);
  }
#endif
  int copies = 4;
  while (copies > 1 && copies * total + 4 * total > budget) --copies;
  const int64_t large = copies * total + 4 * total <= budget ? 4 * total : 0;
  // The worker's share may hold fewer blocks than the free memory suggests: poisoning stops at the
  // first that does not fit (the outputs' own sizes come first, so those are poisoned).
  try {
    for (int i = 0; i < copies; ++i) {
      for (int64_t bytes : output_bytes) blocks.push_back(at::empty({std::max<int64_t>(bytes, 1)}, options));
    }
    blocks.push_back(at::empty({std::max<int64_t>(large, 1 << 20)}, options));
  } catch (const c10::OutOfMemoryError&) {
  }
  for (auto& b : blocks) b.fill_(0xFF);
  synchronize_device(device);
  // Freed in reverse order of allocation: the most recently freed same-size block is reused first.
  while (!blocks.empty()) blocks.pop_back();
}

}  // namespace

int count_process_threads() {
  const auto tids = process_thread_ids();
  return tids.empty() ? -1 : static_cast<int>(tids.size());
}

bool storages_overlap(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || !a.has_storage() || !b.has_storage()) return false;
  const auto* a0 = static_cast<const char*>(a.storage().data());
  const auto* b0 = static_cast<const char*>(b.storage().data());
  if (a0 == nullptr || b0 == nullptr) return false;
  if (a.device() != b.device()) return false;
  const auto* a1 = a0 + a.storage().nbytes();
  const auto* b1 = b0 + b.storage().nbytes();
  return a0 < b1 && b0 < a1;
}

namespace {

// What a probe found: a check judged here, or a group of outputs for the judge.
void add_check(GuardOutputs& reply, const std::string& name, bool passed, const std::string& kind, const std::string& detail) {
  reply.checks.push_back({name, passed, kind, detail});
}
void add_group(GuardOutputs& reply, const std::string& name, const std::string& kind, int seed_index,
               const std::vector<at::Tensor>& outputs) {
  reply.groups.push_back({name, kind, seed_index, static_cast<int64_t>(outputs.size())});
  for (const auto& out : outputs) {
    if (!out.defined()) throw Error("the candidate returned an undefined tensor");
    reply.outputs.push_back(out);
  }
}

// Part 1: one call on inputs A (threads and work left running, aliasing, ownership, input
// mutation), then new values B at the same addresses while the first outputs are held.
GuardOutputs first_call_probes(const GuardRequest& request, const TaskSpec& spec, const std::string& scale, const ValueMix& mix,
                               const at::Device& device, const FixedParams& fixed, const CandidateForward& candidate) {
  const auto& seeds = request.seeds;
  const double settle_seconds = request.settle_seconds;
  const auto& output_bytes = request.output_bytes;
  GuardOutputs reply;
  // 1. One call on inputs A: threads and work left running, aliasing, ownership, input mutation.
  //    The copies taken to compare with are let go as soon as their check is done: at full scale
  //    each is as large as an input or output, and the worker's share must hold the held outputs.
  auto args = make_call_arguments(spec, scale, {seeds[0]}, mix, device, fixed);
  auto args_before = snapshot_all(args);
  // Free memory is poisoned first: an output block that still held an earlier call's correct
  // result (seed A was trial 1's seed) would look finished at return even while work on another
  // stream was still writing it.
  poison_free_memory(output_bytes, device);
  synchronize_device(device);
  const int threads_before = count_process_threads();
  // Not waiting for the device here: an ordinary call's device-wide sync would complete work left
  // on other streams before the snapshot below, and it would always look finished.
  auto first = candidate(args, /*wait_for_device=*/false);
  synchronize_current_stream(device);
  const int threads_after = count_process_threads();
  auto seen_at_return = snapshot_all(first);
  std::this_thread::sleep_for(std::chrono::duration<double>(settle_seconds));
  synchronize_device(device);
  const int threads_later = count_process_threads();
  add_check(reply, "threads", threads_after <= threads_before, "deferred_work",
             fmt::format("{} threads before forward, {} when it returned, {} after {:g} s", threads_before,
                         threads_after, threads_later, settle_seconds));
  {
    std::string changed;
    for (size_t i = 0; i < first.size(); ++i) {
      if (first[i].defined() && !same_bytes(first[i], seen_at_return[i])) changed += fmt::format(" {}", i);
    }
    add_check(reply, "deferred work", changed.empty(), "deferred_work",
               changed.empty() ? fmt::format("outputs unchanged {:g} s after return and a device sync", settle_seconds)
                               : "outputs changed after forward returned:" + changed);
  }
  seen_at_return.clear();
  {
    std::string found;
    for (size_t i = 0; i < first.size(); ++i) {
      if (!first[i].defined()) continue;
      for (size_t j = 0; j < args.size(); ++j) {
        if (storages_overlap(first[i], args[j])) found += fmt::format("output {} shares memory with argument {}; ", i, j);
      }
      for (size_t j = 0; j < i; ++j) {
        if (storages_overlap(first[i], first[j])) found += fmt::format("outputs {} and {} share memory; ", j, i);
      }
      if (first[i].has_storage() && first[i].storage().allocator() == nullptr) {
        found += fmt::format("output {} wraps memory the candidate did not allocate with LibTorch; ", i);
      }
    }
    add_check(reply, "aliasing", found.empty(), "aliasing",
               found.empty() ? fmt::format("{} outputs own their storage", first.size()) : found);
  }
  {
    std::string modified;
    for (size_t j = 0; j < args.size(); ++j) {
      if (!same_bytes(args[j], args_before[j])) modified += fmt::format(" {}", j);
    }
    add_check(reply, "input mutation", modified.empty(), "input_mutation",
               modified.empty() ? fmt::format("{} arguments unchanged", args.size())
                                : "arguments modified in place:" + modified);
  }
  args_before.clear();
  // The first call ran on poisoned free memory: its outputs are judged before the cache probes, so
  // that a program which leaves part of its output unwritten is called what it is. (Judged only
  // after them, the second call's output block held whatever an earlier call had left in it, and
  // on some machines' allocation histories the program was called an output cache.)
  add_group(reply, "first call, free memory poisoned", "stale_memory", 0, first);

  // 2. Cache probe: new values (B) written into A's tensors (same addresses), while the first
  //    outputs are still held (A's values at new addresses are part 2).
  {
    fill_call_arguments(spec, scale, {seeds[1]}, mix, args, fixed);  // in place: no second set of inputs
    auto second = candidate(args, /*wait_for_device=*/true);
    synchronize_device(device);
    std::string reused;
    for (size_t i = 0; i < second.size() && i < first.size(); ++i) {
      if (storages_overlap(second[i], first[i])) reused += fmt::format(" {}", i);
    }
    add_check(reply, "output reuse", reused.empty(), "output_cache",
               reused.empty() ? "two calls returned separate storage" : "two calls returned the same storage for outputs:" + reused);
    add_group(reply, "same addresses, new values", "output_cache", 1, second);
  }
  return reply;
}

// Parts 2 and 3: one call on A's values in fresh tensors, with free memory poisoned first (the
// earlier parts' outputs were compared and let go, so a program that returned an unwritten block
// still holding an earlier correct result would look like one that computed it). Part 2 judges it
// as an output cache keyed by address, part 3 as stale memory. (The reference never runs in this
// process, so its outputs cannot be left in this allocator for a candidate to find.)
GuardOutputs fresh_call_probe(const GuardRequest& request, const TaskSpec& spec, const std::string& scale, const ValueMix& mix,
                              const at::Device& device, const FixedParams& fixed, const CandidateForward& candidate, const std::string& name,
                              const std::string& kind) {
  GuardOutputs reply;
  auto fresh = make_call_arguments(spec, scale, {request.seeds[0]}, mix, device, fixed);
  poison_free_memory(request.output_bytes, device);
  add_group(reply, name, kind, 0, candidate(fresh, /*wait_for_device=*/true));
  synchronize_device(device);
  return reply;
}

}  // namespace

GuardOutputs run_guard_probes(const GuardRequest& request, const TaskSpec& spec, const std::string& scale, const ValueMix& mix,
                              const at::Device& device, const CandidateForward& candidate, const FixedParams& fixed) {
  if (request.seeds.size() != 2) throw InputError("guard: need exactly two seeds");
  switch (request.part) {
    case 1: return first_call_probes(request, spec, scale, mix, device, fixed, candidate);
    case 2: return fresh_call_probe(request, spec, scale, mix, device, fixed, candidate, "same values, new addresses", "output_cache");
    case 3: return fresh_call_probe(request, spec, scale, mix, device, fixed, candidate, "free memory poisoned", "stale_memory");
    default: throw InputError(fmt::format("guard: no part {}", request.part));
  }
}

}  // namespace crl::worker
