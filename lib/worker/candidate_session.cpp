// The candidate worker's request handlers: load, arena, run, time, guard (see candidate_session.h).
#include "worker/candidate_session.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#if CRL_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include "core/clock.h"
#include "core/error.h"
#include "worker/guard_probe.h"
#include "program/value_mix.h"
#include "worker/kernelbench_rule.h"
#include "program/arguments.h"
#include "program/program_text.h"

namespace crl::worker {

struct CandidateSession::SlotGraph {
#if CRL_HAVE_CUDA
  at::cuda::CUDAGraph graph;
#endif
  std::vector<at::Tensor> outputs;  // where each replay writes (the graph's own memory)
};

nlohmann::json CandidateSession::handle(const nlohmann::json& request) {
  const Op op = request_op(request);
  if (op == Op::load) return answer<LoadRequest>(*this, request);
  if (!candidate_) throw InputError(fmt::format("request '{}' before 'load'", op_name(op)));
  // Whatever the previous request described has been read by now.
  held_.clear();
  nlohmann::json reply = serve(op, request);
  // Taking turns with the judge (eval/memory_plan.h): what a trial or the guards made goes back to
  // the driver, but not around timed batches (start_timing empties the cache itself, the same for
  // both programs).
  if (release_after_requests_ && op != Op::time && op != Op::start_timing) release_cached_memory();
  return reply;
}

void CandidateSession::release_cached_memory() {
  exports_.clear();
  device_.release_cached_memory();
}

nlohmann::json CandidateSession::serve(Op op, const nlohmann::json& request) {
  switch (op) {
    case Op::arena: return answer<ArenaRequest>(*this, request);
    case Op::run: return answer<RunRequest>(*this, request);
    case Op::time: return answer<TimeRequest>(*this, request);
    case Op::guard: return answer<GuardRequest>(*this, request);
    case Op::release: return answer<ReleaseRequest>(*this, request);
    case Op::memory_share: return answer<MemoryShareRequest>(*this, request);
    case Op::start_timing: return answer<StartTimingRequest>(*this, request);
    default: throw InputError(fmt::format("a program worker does not serve '{}'", op_name(op)));
  }
}

ArenaReply CandidateSession::on(const ArenaRequest& request) {
  // On the GPU the arena is this process's own memory, exported to the judge (which fills and
  // checks it): timed kernels read local memory, as any program in production would.
  if (!device_.is_cuda()) {
    arena_.map_shared(request.layout, kArenaFd);
    return {};
  }
  arena_.allocate(request.layout, device_.device());
  device_.hold_outside_allocator(request.layout.total_bytes());
  return {arena_.ipc_handle()};
}

NoReply CandidateSession::on(const ReleaseRequest&) { return {}; }

NoReply CandidateSession::on(const MemoryShareRequest& request) {
  // (the evaluator's memory plan, eval/memory_plan.h: sent to the reference's timing worker, whose
  // share is known only once the judge has measured the reference's call)
  if (device_.is_cuda()) device_.set_share(request.gpu_memory_fraction);
  return {};
}

LoadReply CandidateSession::on(const LoadRequest& request) {
  spec_ = load_spec(request, &scale_);
  device_.init(request.device);
  release_after_requests_ = request.device.release_after_requests;
  value_mix_ = ValueMix{request.value_mix, false};
  if (!value_mix_.kinds.empty() && value_mix_.kinds.size() != spec_->num_args()) {
    throw InputError(fmt::format("load: a value mix of {} arguments for {}", value_mix_.kinds.size(), spec_->num_args()));
  }
  replay_as_graph_ = request.replay_as_graph;
  if (replay_as_graph_ && !device_.is_cuda()) throw InputError("replay_as_graph needs the cuda device");
  const std::string& library = request.library;
  const bool python = parse_program_kind(request.program_kind, "load request: program_kind") == ProgramKind::kernelbench;
  // KernelBench's rule for a .crl candidate: Model's module runs here, before the candidate is loaded
  // (a ModelNew keeps its own values and reads no params).
  const bool build_model = !python && request.kernelbench_seed != 0 && !request.kernelbench_model.empty();
  if (python || build_model) {
    // The interpreter and torch start before the file rules (they read hundreds of files); the
    // rules then keep only its module folders readable, for what the candidate imports later.
    for (const auto& folder : pyprogram::start_python()) {
      if (file_rules_) file_rules_->readable_paths.push_back(folder);
    }
  }
  if (file_rules_) {
    // Of the GPUs' device files: none for a CPU program; on the GPU the driver's and this GPU's own
    // node, not the other GPUs' (a program could reach them with a second copy of the driver's
    // library, whatever CUDA_VISIBLE_DEVICES says).
    const int minor = device_.gpu_minor();
    if (device_.is_cuda()) {
      std::fprintf(stderr, "crl-worker: GPU device files: %s\n",
                   minor >= 0 ? fmt::format("the driver's and /dev/nvidia{}", minor).c_str()
                              : "all (this GPU's device minor is not known)");
    }
    const auto report = apply_sandbox_after_device(*file_rules_, device_.is_cuda(), minor);
    std::fprintf(stderr, "crl-worker: %s\n", report.detail.c_str());
  }
  if (build_model) {
    fixed_params_ = kernelbench_param_values(request.kernelbench_model, request.kernelbench_seed, *spec_, scale_, device_.device());
  }
  // "reference" when this worker times the reference (the judge's arena, the same requests).
  if (python) {
    std::vector<pyprogram::ExtensionLibrary> extensions;
    for (const auto& e : request.extensions) extensions.push_back({e.key, e.library, e.error});
    try {
      candidate_ = std::make_unique<NamedProgram>(
          request.program_name,
          std::make_shared<pyprogram::PythonProgram>(request.python_source, request.origin, extensions, *spec_, scale_, device_.device(),
                                                     pyprogram::BuildRule{.class_name = request.python_class,
                                                                          .seed = request.kernelbench_seed}));
    } catch (const pyprogram::NeedsBuild& needs) {
      // Nothing is loaded: the evaluator builds these and asks a fresh worker (this one ran the module).
      LoadReply reply;
      const nlohmann::json calls = nlohmann::json::parse(needs.calls());
      if (!calls.is_array() || calls.size() > kMaxExtensionBuilds) {
        throw Error(fmt::format("{}: {} load_inline calls, more than the {} crl builds for one candidate", request.origin,
                                calls.is_array() ? calls.size() : 0, kMaxExtensionBuilds));
      }
      for (const auto& call : calls) reply.needs_builds.push_back(ExtensionBuild::from(Fields(call, "load_inline call")));
      return reply;
    }
  } else {
    candidate_ = std::make_unique<NamedProgram>(request.program_name, library);
  }
  times_the_reference_ = request.program_name == "reference";
  // Its intra-op threads: for the reference's timing worker, the cores a candidate may use on the
  // CPU (a candidate's own answer is never used: its static initialisers ran by now).
  LoadReply reply;
  reply.num_args = static_cast<int>(spec_->num_args());
  reply.intra_op_threads = at::get_num_threads();
  return reply;
}

RunReply CandidateSession::on(const RunRequest& request) {
  std::vector<at::Tensor> args;
  if (request.slot) {
    args = arena_.arguments(*request.slot);
  } else {
    // Guards' own inputs (their seeds are trial seeds; nothing is timed on them), made as the judge
    // made that trial's.
    args = make_call_arguments(*spec_, scale_, {request.seed, false, false}, value_mix_, device_.device(), fixed_params_);
    if (request.spread_samples) (void)spread_samples(*spec_, args);
  }
  const auto outputs = call_and_check(device_, *candidate_, args);
  RunReply reply{export_outputs(outputs, &held_)};
  device_.check("describing the outputs");  // the copies of non-contiguous outputs done before the reply
  return reply;
}

TimeReply CandidateSession::on(const TimeRequest& request) {
  // One call per slot back to back (fresh inputs in each), one device sync at the end; the
  // evaluator's clock around the request is the measurement, and every slot's outputs are
  // described so that the judge can check any of them.
  const auto arrived = std::chrono::steady_clock::now();
  std::vector<std::vector<at::Tensor>> outputs;
  device_.synchronize();
  device_.touch();
  BatchTimeline timeline(events_, request.slots.size());
  if (replay_as_graph_) {
#if CRL_HAVE_CUDA
    for (const int64_t slot : request.slots) {
      if (slot < 0 || static_cast<size_t>(slot) >= graphs_.size()) throw InputError(fmt::format("slot {} has no graph", slot));
      graphs_[static_cast<size_t>(slot)]->graph.replay();
      outputs.push_back(graphs_[static_cast<size_t>(slot)]->outputs);
      timeline.after_call();
    }
#endif
  } else if (request.turns) {
    // Each call waits for its turn: its inputs reach the arena only once the call before it has
    // returned, and what it returned (made contiguous here, as describing it would) is published
    // for the evaluator's sample before the next turn.
    TurnPage* page = arena_.turn_page();
    if (page == nullptr) throw InputError("a timed batch with turns needs the CPU's shared arena");
    TurnGate gate(page, kTurnTimeoutSeconds);
    for (size_t i = 0; i < request.slots.size(); ++i) {
      gate.wait_for_turn(static_cast<uint32_t>(i));
      std::vector<at::Tensor> out = (*candidate_)(arena_.arguments(static_cast<int>(request.slots[i])));
      for (auto& t : out) t = t.contiguous();
      gate.finish(static_cast<uint32_t>(i), out);
      outputs.push_back(std::move(out));
      timeline.after_call();
    }
  } else {
    for (const int64_t slot : request.slots) {
      outputs.push_back((*candidate_)(arena_.arguments(static_cast<int>(slot))));
      timeline.after_call();
    }
  }
  BatchTimelineSummary timed = timeline.summary();
  device_.check(fmt::format("the {}'s timed calls", candidate_->which()));
  const auto computed = std::chrono::steady_clock::now();
  // Describing makes non-contiguous outputs contiguous: those copies run before the reply, timed
  // (they were the program's to do) and never after it, where the judge's idle probe would see them.
  nlohmann::json batch = describe_batch(outputs, &held_, times_the_reference_ ? nullptr : &exports_);
  device_.check(fmt::format("describing the {}'s timed outputs", candidate_->which()));
  const auto described = std::chrono::steady_clock::now();
  timed.served_us = std::chrono::duration<double, std::micro>(described - arrived).count();
  timed.describe_us = std::chrono::duration<double, std::micro>(described - computed).count();
  timed.arrived_at_us = steady_us(arrived);
  timed.described_at_us = steady_us(described);
  return {std::move(batch), timed};
}

NoReply CandidateSession::on(const StartTimingRequest& request) {
  // Trials and guards left a candidate's allocator in its own state; the reference's timing worker
  // ran none of them. Both start timing with nothing cached.
  graphs_.clear();
  release_cached_memory();
  const int slots = request.slots;
  events_.reserve(device_, 3);  // the timed batches' timeline: start, first call, last call
  if (!replay_as_graph_) {
    // One untimed batch first: the reference's worker has run nothing yet, while the candidate's
    // ran its trials and guards, so the first timed batches would find one allocator (and, on
    // the CPU, glibc's mmap threshold and the page tables) warm and the other cold.
    std::vector<std::vector<at::Tensor>> warm;
    for (int s = 0; s < slots; ++s) warm.push_back((*candidate_)(arena_.arguments(s)));
    device_.check(fmt::format("the {}'s warm-up batch", candidate_->which()));
    return {};
  }
#if CRL_HAVE_CUDA
  // One eager call first (cuBLAS and cuDNN handles, workspaces), then each slot's call captured on
  // a side stream, all graphs sharing one memory pool (replayed in capture order, one at a time).
  (void)call_and_check(device_, *candidate_, arena_.arguments(0));
  const auto pool = at::cuda::graph_pool_handle();
  c10::cuda::CUDAStreamGuard on_side_stream(at::cuda::getStreamFromPool());
  for (int s = 0; s < slots; ++s) {
    auto g = std::make_shared<SlotGraph>();
    g->graph.capture_begin(pool);
    g->outputs = (*candidate_)(arena_.arguments(s));
    g->graph.capture_end();
    graphs_.push_back(std::move(g));
  }
  device_.check("capturing the reference as CUDA graphs");
#else
  (void)request;
#endif
  return {};
}

GuardReply CandidateSession::on(const GuardRequest& request) {
  GuardOutputs probes = run_guard_probes(
      request, *spec_, scale_, value_mix_, device_.device(),
      [this](const std::vector<at::Tensor>& args, bool wait_for_device) {
        if (!wait_for_device) return (*candidate_)(args);
        return call_and_check(device_, *candidate_, args);
      },
      fixed_params_);
  // The probes' output groups leave as references, like every other output.
  GuardReply reply{std::move(probes.checks), std::move(probes.groups), export_outputs(probes.outputs, &held_)};
  device_.check("describing the guard's outputs");
  return reply;
}

}  // namespace crl::worker
