// Request handlers of crl-worker: load (spec + libraries), run (one seeded call), time
// (interleaved, cache-flushed timed calls of reference and candidate on a pool of inputs).
#include "apps/crl-worker/worker_session.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <random>

#include "core/error.h"
#include "compile/loaded_program.h"
#include "eval/guard_probe.h"
#include "program/arguments.h"
#include "program/program_text.h"

#if CRL_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime.h>
#endif

namespace crl::worker {

// A loaded program library (lib/compile checks its ABI) and its role in messages.
class NamedProgram {
 public:
  NamedProgram(std::string which, const std::string& path) : which_(std::move(which)), program_(path) {}
  // Never unloaded before the worker exits: a program's static destructors or threads could
  // still run, and the worker ends with the evaluation anyway.
  std::vector<at::Tensor> operator()(const std::vector<at::Tensor>& args) const {
    try {
      return program_.forward(args);
    } catch (const Error& e) {
      throw Error("the " + which_ + "'s forward failed: " + e.what());
    }
  }
  const std::string& which() const { return which_; }

 private:
  std::string which_;
  LoadedProgram program_;
};

WorkerSession::WorkerSession() = default;
WorkerSession::~WorkerSession() = default;

eval::Message WorkerSession::handle(const eval::Message& request) {
  const std::string op = request.header.value("op", "");
  if (op == "load") return load(request.header);
  if (!spec_) throw InputError("request '" + op + "' before 'load'");
  if (op == "run") return run(request.header);
  if (op == "time") return time(request.header);
  if (op == "guard") {  // hack guards (lib/eval/guard_probe.h)
    return eval::run_guard_probes(
        request.header, *spec_, scale_, device_,
        [this](const std::vector<at::Tensor>& args) { return call(program("candidate"), args); },
        [this](const std::vector<at::Tensor>& args) { return call(program("reference"), args); });
  }
  throw InputError("unknown request '" + op + "'");
}

eval::Message WorkerSession::load(const nlohmann::json& request) {
  const std::string reference_program = request.at("reference_program").get<std::string>();
  spec_ = parse_task_spec(load_program_file(reference_program).spec, reference_program);
  scale_ = request.at("scale").get<std::string>();
  spec_->scale_variables(scale_);  // throws for an unknown scale
  const std::string device = request.at("device").get<std::string>();
  if (request.contains("cpu_threads") && request["cpu_threads"].get<int>() > 0) {
    at::set_num_threads(request["cpu_threads"].get<int>());
  }
  if (device == "cuda") {
#if CRL_HAVE_CUDA
    device_ = at::Device(at::kCUDA, 0);
    // A first allocation initialises CUDA and the caching allocator, which the cap applies to.
    at::empty({1}, at::TensorOptions().device(device_));
    const double fraction = request.value("gpu_memory_fraction", 0.0);
    if (fraction > 0) c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, 0);
#else
    throw InputError("this crl-worker was built without CUDA");
#endif
  } else if (device != "cpu") {
    throw InputError("device must be cpu or cuda, not '" + device + "'");
  }
  reference_ = std::make_unique<NamedProgram>("reference", request.at("reference_library").get<std::string>());
  const std::string candidate = request.value("candidate_library", "");
  if (!candidate.empty()) candidate_ = std::make_unique<NamedProgram>("candidate", candidate);
  return eval::Message{{{"num_args", spec_->num_args()}}, {}};
}

NamedProgram& WorkerSession::program(const std::string& which) {
  if (which == "reference" && reference_) return *reference_;
  if (which == "candidate" && candidate_) return *candidate_;
  throw InputError("no " + which + " program is loaded");
}

void WorkerSession::check_device(const std::string& after) {
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

std::vector<at::Tensor> WorkerSession::call(NamedProgram& prog, const std::vector<at::Tensor>& args) {
  std::vector<at::Tensor> outputs;
  try {
    outputs = prog(args);
  } catch (const std::exception& e) {
    check_device(prog.which() + "'s forward");  // a sticky error explains the failure better
    throw;
  }
  check_device(prog.which() + "'s forward");
  return outputs;
}

eval::Message WorkerSession::run(const nlohmann::json& request) {
  NamedProgram& prog = program(request.at("program").get<std::string>());
  const auto args = make_arguments(*spec_, scale_, request.at("seed").get<uint64_t>(), device_);
  auto outputs = call(prog, args);
  eval::Message reply;
  reply.header["outputs"] = outputs.size();
  for (auto& out : outputs) {
    if (!out.defined()) throw Error("the " + prog.which() + " returned an undefined tensor");
    const std::string device = out.device().is_cuda() ? "cuda" : out.device().is_cpu() ? "cpu" : out.device().str();
    reply.tensors.push_back(eval::ProgramOutput{out, device});
  }
  return reply;
}

void WorkerSession::flush_caches() {
  // Writing a buffer of twice the last-level cache evicts whatever the previous call left there.
  if (!flush_buffer_.defined()) {
    int64_t bytes = 256ll << 20;
#if CRL_HAVE_CUDA
    if (device_.is_cuda()) {
      int l2 = 0;
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
      bytes = std::max<int64_t>(2ll * l2, 128ll << 20);
    }
#endif
    if (device_.is_cpu()) {
      const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
      bytes = std::max<int64_t>(2ll * std::max(llc, 0L), 64ll << 20);
    }
    flush_buffer_ = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device_));
  }
  flush_buffer_.fill_(static_cast<int>(++flush_counter_ & 0x7f));
}

eval::Message WorkerSession::time(const nlohmann::json& request) {
  NamedProgram& ref = program("reference");
  NamedProgram& cand = program("candidate");
  const auto seeds = request.at("pool_seeds").get<std::vector<uint64_t>>();
  const int pairs = request.at("pairs").get<int>();
  const int warmup = request.value("warmup", 3);
  const bool flush = request.value("flush", true);
  std::mt19937_64 order_rng(request.at("order_seed").get<uint64_t>());
  if (seeds.empty() || pairs <= 0) throw InputError("time: need pool_seeds and a positive number of pairs");
  if (seeds != pool_seeds_) {
    pool_.clear();
    for (uint64_t seed : seeds) pool_.push_back(make_arguments(*spec_, scale_, seed, device_));
    pool_seeds_ = seeds;
  }
  size_t next_input = 0;
  if (!warmed_up_) {
    for (int i = 0; i < warmup; ++i) {
      call(ref, pool_[next_input++ % pool_.size()]);
      call(cand, pool_[next_input++ % pool_.size()]);
    }
    warmed_up_ = true;
  }
#if CRL_HAVE_CUDA
  cudaEvent_t start_event = nullptr;
  cudaEvent_t end_event = nullptr;
  if (device_.is_cuda()) {
    cudaEventCreate(&start_event);
    cudaEventCreate(&end_event);
  }
#endif
  // One timed call: caches flushed, device idle before and after, so work on any stream counts.
  auto timed_call = [&](NamedProgram& prog, const std::vector<at::Tensor>& args, double* wall_us) {
    if (flush) flush_caches();
    double us = 0;
#if CRL_HAVE_CUDA
    if (device_.is_cuda()) {
      cudaDeviceSynchronize();
      const auto wall_start = std::chrono::steady_clock::now();
      cudaStream_t stream = at::cuda::getCurrentCUDAStream();
      cudaEventRecord(start_event, stream);
      std::vector<at::Tensor> outputs;
      try {
        outputs = prog(args);
      } catch (const std::exception&) {
        check_device(prog.which() + "'s timed forward");  // a sticky error explains it better
        throw;
      }
      cudaEventRecord(end_event, stream);
      check_device(prog.which() + "'s timed forward");
      *wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - wall_start).count();
      float ms = 0;
      cudaEventElapsedTime(&ms, start_event, end_event);
      return static_cast<double>(ms) * 1000.0;
    }
#endif
    const auto start = std::chrono::steady_clock::now();
    auto outputs = prog(args);
    us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    *wall_us = us;
    return us;
  };
  nlohmann::json reference_us = nlohmann::json::array();
  nlohmann::json candidate_us = nlohmann::json::array();
  nlohmann::json reference_wall_us = nlohmann::json::array();
  nlohmann::json candidate_wall_us = nlohmann::json::array();
  for (int i = 0; i < pairs; ++i) {
    // Both calls of a pair get the same input set (so neither program is always timed on other
    // buffers than the other), each pair the next set: consecutive calls of a program never see
    // the same inputs. Which program goes first is a coin flip.
    const auto& ref_args = pool_[next_input % pool_.size()];
    const auto& cand_args = pool_[next_input++ % pool_.size()];
    double ref_wall = 0;
    double cand_wall = 0;
    double ref_time = 0;
    double cand_time = 0;
    if (order_rng() & 1) {
      ref_time = timed_call(ref, ref_args, &ref_wall);
      cand_time = timed_call(cand, cand_args, &cand_wall);
    } else {
      cand_time = timed_call(cand, cand_args, &cand_wall);
      ref_time = timed_call(ref, ref_args, &ref_wall);
    }
    reference_us.push_back(ref_time);
    candidate_us.push_back(cand_time);
    reference_wall_us.push_back(ref_wall);
    candidate_wall_us.push_back(cand_wall);
  }
#if CRL_HAVE_CUDA
  if (start_event != nullptr) cudaEventDestroy(start_event);
  if (end_event != nullptr) cudaEventDestroy(end_event);
#endif
  return eval::Message{{{"reference_us", reference_us},
                        {"candidate_us", candidate_us},
                        {"reference_wall_us", reference_wall_us},
                        {"candidate_wall_us", candidate_wall_us}},
                       {}};
}

}  // namespace crl::worker
