// Request handlers of crl-worker: load (spec + libraries), run (one seeded call), time
// (interleaved, cache-flushed timed calls of reference and candidate on fresh inputs).
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
#include "program/run_settings.h"

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
        [this](const std::vector<at::Tensor>& args, bool wait_for_device) {
          return call(program("candidate"), args, wait_for_device);
        },
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
  apply_program_run_settings();
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

std::vector<at::Tensor> WorkerSession::call(NamedProgram& prog, const std::vector<at::Tensor>& args,
                                            bool wait_for_device) {
  std::vector<at::Tensor> outputs;
  try {
    outputs = prog(args);
  } catch (const std::exception& e) {
    check_device(prog.which() + "'s forward");  // a sticky error explains the failure better
    throw;
  }
  if (wait_for_device) check_device(prog.which() + "'s forward");
  return outputs;
}

eval::Message WorkerSession::run(const nlohmann::json& request) {
  NamedProgram& prog = program(request.at("program").get<std::string>());
  auto args = make_arguments(*spec_, scale_, request.at("seed").get<uint64_t>(), device_);
  size_t spread_inputs = 0;
  if (request.value("spread_samples", false)) spread_inputs = spread_samples(*spec_, args);  // the per-sample guard
  auto outputs = call(prog, args);
  eval::Message reply;
  reply.header["spread_inputs"] = spread_inputs;
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

std::string WorkerSession::timed_outputs_disagreement(const std::vector<at::Tensor>& reference,
                                                      const std::vector<at::Tensor>& candidate) const {
  if (reference.size() != candidate.size()) {
    return fmt::format("returned {} outputs, the reference {}", candidate.size(), reference.size());
  }
  for (size_t i = 0; i < reference.size(); ++i) {
    const at::Tensor& r = reference[i];
    const at::Tensor& c = candidate[i];
    if (!c.defined() || c.sizes() != r.sizes() || c.scalar_type() != r.scalar_type() || c.device() != r.device()) {
      return fmt::format("output {} changed its shape, dtype or device", i);
    }
    if (r.numel() == 0) continue;
    const Tolerance tol = spec_->tolerance_for(r.scalar_type());
    // In chunks, so that full-scale outputs need no whole-size temporaries.
    const at::Tensor rf = r.contiguous().view(-1);
    const at::Tensor cf = c.contiguous().view(-1);
    constexpr int64_t kChunk = int64_t{1} << 26;
    for (int64_t begin = 0; begin < rf.numel(); begin += kChunk) {
      const int64_t length = std::min(kChunk, rf.numel() - begin);
      const at::Tensor rc = rf.narrow(0, begin, length);
      const at::Tensor cc = cf.narrow(0, begin, length);
      const bool close = at::isFloatingType(r.scalar_type())
                             ? at::isclose(cc, rc, tol.rtol, tol.atol, /*equal_nan=*/true).all().item<bool>()
                             : at::equal(cc, rc);
      if (!close) return fmt::format("output {} is outside the tolerance of the reference's", i);
    }
  }
  return "";
}

eval::Message WorkerSession::time(const nlohmann::json& request) {
  NamedProgram& ref = program("reference");
  NamedProgram& cand = program("candidate");
  // Pair i of this request gets the inputs of seed input_seed + i (make_arguments mixes seeds, so
  // consecutive ones are unrelated): every timed pair sees values no earlier call saw, so an
  // output cache keyed on anything about the inputs can never be right and fast at once.
  const uint64_t input_seed = request.at("input_seed").get<uint64_t>();
  const int pairs = request.at("pairs").get<int>();
  const int warmup = request.value("warmup", 3);
  const bool flush = request.value("flush", true);
  std::mt19937_64 order_rng(request.at("order_seed").get<uint64_t>());
  if (pairs <= 0) throw InputError("time: need a positive number of pairs");
  if (!warmed_up_) {
    for (int i = 0; i < warmup; ++i) {
      // Warm-up inputs come from seeds of their own (the constant spells "WARMUP").
      const auto args = make_arguments(*spec_, scale_, input_seed ^ 0x5741524d55500000ULL ^ static_cast<uint64_t>(i), device_);
      call(ref, args);
      call(cand, args);
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
  // The end event is recorded after a device-wide synchronisation: recorded on the current stream
  // right after forward returns, it would not wait for work the program left on other streams.
  auto timed_call = [&](NamedProgram& prog, const std::vector<at::Tensor>& args, double* wall_us,
                        std::vector<at::Tensor>* outputs) {
    if (flush) flush_caches();
#if CRL_HAVE_CUDA
    if (device_.is_cuda()) {
      cudaDeviceSynchronize();
      const auto wall_start = std::chrono::steady_clock::now();
      cudaStream_t stream = at::cuda::getCurrentCUDAStream();
      cudaEventRecord(start_event, stream);
      try {
        *outputs = prog(args);
      } catch (const std::exception&) {
        check_device(prog.which() + "'s timed forward");  // a sticky error explains it better
        throw;
      }
      check_device(prog.which() + "'s timed forward");  // synchronises the whole device
      cudaEventRecord(end_event, stream);
      cudaEventSynchronize(end_event);
      *wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - wall_start).count();
      float ms = 0;
      cudaEventElapsedTime(&ms, start_event, end_event);
      return static_cast<double>(ms) * 1000.0;
    }
#endif
    const auto start = std::chrono::steady_clock::now();
    *outputs = prog(args);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    *wall_us = us;
    return us;
  };
  nlohmann::json reference_us = nlohmann::json::array();
  nlohmann::json candidate_us = nlohmann::json::array();
  nlohmann::json reference_wall_us = nlohmann::json::array();
  nlohmann::json candidate_wall_us = nlohmann::json::array();
  for (int i = 0; i < pairs; ++i) {
    // Both calls of a pair get the same inputs (made before either is timed). Which program goes
    // first is a coin flip.
    const auto args = make_arguments(*spec_, scale_, input_seed + static_cast<uint64_t>(i), device_);
    const auto& ref_args = args;
    const auto& cand_args = args;
    double ref_wall = 0;
    double cand_wall = 0;
    double ref_time = 0;
    double cand_time = 0;
    std::vector<at::Tensor> ref_out;
    std::vector<at::Tensor> cand_out;
    if (order_rng() & 1) {
      ref_time = timed_call(ref, ref_args, &ref_wall, &ref_out);
      cand_time = timed_call(cand, cand_args, &cand_wall, &cand_out);
    } else {
      cand_time = timed_call(cand, cand_args, &cand_wall, &cand_out);
      ref_time = timed_call(ref, ref_args, &ref_wall, &ref_out);
    }
    // Timed calls are checked too (outside the timed region): a program that is right in the
    // trials and returns something cheaper once inputs repeat (a cache keyed on an address and
    // a few values, say) would otherwise be timed on its shortcut.
    const std::string disagreement = timed_outputs_disagreement(ref_out, cand_out);
    if (!disagreement.empty()) {
      return eval::Message{{{"timed_mismatch", fmt::format("timed pair {}: {}", i + 1, disagreement)}}, {}};
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
