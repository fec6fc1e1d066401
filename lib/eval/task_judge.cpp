// Opening a task's judge (task_judge.h).
#include "eval/task_judge.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <future>

#include "core/error.h"
#include "eval/batch_plan.h"
#include "eval/worker_call.h"
#include "program/program_text.h"
#include "program/task_spec.h"
#include "program/value_mix.h"
#include "suite/kernelbench_checkout.h"

namespace crl::eval {
namespace {

// The reference's timing worker's share while it loads beside the opening judge (its params; its
// arena and batches come after the memory plan): the usual one, or the user's.
double reference_load_share(const EvalOptions& options) {
  return options.reference_gpu_memory_fraction > 0 ? options.reference_gpu_memory_fraction : kUsualShares.reference;
}

// Requests to the judge while it is being opened: a failure is the reference's (an Error).
class Opening {
 public:
  Opening(const Task& task, const EvalOptions& options, WorkerProcess& judge) : task_(task), options_(options), judge_(judge) {}
  template <typename Request>
  typename Request::Reply ask(const Request& request, const std::string& during) {
    auto reply = call(judge_, request, options_.load_timeout_seconds + options_.call_timeout_seconds, during);
    if (!reply) {
      throw Error(fmt::format("the reference of {} failed: {}\n{}", task_.id, reply.failure().message,
                              judge_.log(options_.max_log_bytes)));
    }
    return std::move(*reply);
  }

 private:
  const Task& task_;
  const EvalOptions& options_;
  WorkerProcess& judge_;
};

// The reference run on every trial's and edge trial's inputs, held under trial:<i> and edge:<i>;
// then, where a program copying one sample across the batch would pass, its run with the samples
// scaled apart (the per-sample guard). Sets the reference's outputs.
// Every reference output a candidate's is compared with is held with its float64 errors (the
// precision contract); a reply that says why there are none is kept for the judge step.
void hold_reference_outputs(TaskJudge& j, Opening& opening) {
  const auto held = [&](const worker::ReferenceReply& r) {
    if (j.float64_missing.empty()) j.float64_missing = r.float64_missing;
  };
  for (size_t i = 0; i < j.seeds.size(); ++i) {
    const auto r = opening.ask(worker::ReferenceRequest{fmt::format("trial:{}", i), j.seeds[i], false, false, true},
                               fmt::format("reference run (seed {})", j.seeds[i]));
    held(r);
    if (i == 0) {
      j.outputs = r.outputs;
      for (const auto& o : j.outputs) j.output_bytes.push_back(o.meta.nbytes());
    }
  }
  for (size_t i = 0; i < j.edge_seeds.size(); ++i) {
    held(opening.ask(worker::ReferenceRequest{fmt::format("edge:{}", i), j.edge_seeds[i], true, false, true},
                     fmt::format("reference run on edge inputs (seed {})", j.edge_seeds[i])));
  }
  if (opening.ask(worker::BatchCopyRequest{"trial:0"}, "the per-sample check").would_pass) {
    const auto r = opening.ask(worker::ReferenceRequest{"spread", j.seeds[0], false, true, true}, "reference run with samples scaled apart");
    held(r);
    j.spread = r.spread_inputs > 0;
  }
}

// The judge's domain probe: which values the reference is defined on, mixed into every call after.
void probe_values(TaskJudge& j, const Task& task, Opening& opening) {
  const auto reply = opening.ask(worker::ValuesRequest{value_probe_seed(j.secret, task.id), eligible_mix(task.spec).kinds},
                                 "the domain probe of the values mixed into every call");
  j.value_mix = reply.kinds;
  j.values_described = fmt::format("values mixed into every call: {} ({} reference runs decided{})",
                                   describe_mix(task.spec, ValueMix{j.value_mix, false}), reply.runs,
                                   reply.dropped.empty() ? "" : "; dropped: " + reply.dropped);
}

// The timed batch's slots (batch_plan.h) and the arenas of that many slots.
void plan_arenas(TaskJudge& j, const Task& task, const EvalOptions& options, const std::vector<worker::TensorMeta>& arguments,
                 Opening& opening) {
  for (int64_t b : j.output_bytes) j.region_bytes += (static_cast<uint64_t>(b) + 255) / 256 * 256;
  const worker::ArenaLayout one = worker::arena_layout(arguments, 1);
  const bool cuda = options.backend == Backend::cuda;
  worker::CallTimeReply call;
  if (options.min_batch_us > 0 || cuda) call = opening.ask(worker::CallTimeRequest{j.seeds[0], 3}, "timing the reference's call");
  if (options.min_batch_us > 0) j.reference_call_us = call.call_us;
  const BatchPlanLimits limits{options.min_batch_us, options.max_batch_calls, options.max_slots, options.arena_bytes,
                               options.batch_output_bytes};
  j.layout = worker::arena_layout(arguments, plan_timed_batch(one.slot_bytes, j.region_bytes, j.reference_call_us, limits));
  if (cuda) {
    // The three processes' shares of the card, now that the reference's call is measured; the
    // judge's own share shrinks to its part (it opened with most of the card, the others not yet
    // holding anything but their contexts).
    const TaskMemory task_memory{static_cast<uint64_t>(call.card_bytes), one.slot_bytes, j.region_bytes, static_cast<uint64_t>(call.peak_bytes),
                                 j.layout.total_bytes(), j.layout.slots};
    j.memory = plan_memory(task_memory, options.gpu_memory_budget, options.judge_cache_bytes, fixed_shares(options));
    (void)opening.ask(worker::MemoryShareRequest{j.memory.judge, static_cast<int64_t>(j.memory.judge_cache), j.memory.take_turns},
                      "the judge's share of the GPU's memory");
  }
  if (options.backend == Backend::cpu) {
    // Sealed at their sizes: the candidate's worker inherits its arena's fd, and shrinking it would
    // crash the judge (SIGBUS) at its next fill (attacks/shared_memory.cpu.crl).
    // Each arena ends with its program's turn page (worker/call_turns.h); this process maps all
    // three arenas to serve the turns of timed batches (eval/turn_server.h).
    const uint64_t shared = j.layout.shared_bytes();
    worker::size_and_seal_shared_memory(j.arena_fd, shared, "the input arena of " + task.id);
    worker::size_and_seal_shared_memory(j.reference_arena_fd, shared, "the reference's input arena of " + task.id);
    worker::size_and_seal_shared_memory(j.staging_fd, shared, "the staging arena of " + task.id);
    worker::size_and_seal_shared_memory(j.region_fd, j.region_bytes, "the output region of " + task.id);
    j.region = worker::map_shared_memory(j.region_fd, j.region_bytes, "the candidate output region");
    j.arena_map = static_cast<char*>(worker::map_shared_memory(j.arena_fd, shared, "the input arena"));
    j.reference_arena_map = static_cast<char*>(worker::map_shared_memory(j.reference_arena_fd, shared, "the reference's input arena"));
    j.staging_map = static_cast<char*>(worker::map_shared_memory(j.staging_fd, shared, "the staging arena"));
  }
  (void)opening.ask(worker::ArenaRequest{j.layout, j.region_bytes}, "setting up the input arenas");
}

}  // namespace

FixedShares fixed_shares(const EvalOptions& options) {
  return {options.judge_gpu_memory_fraction, options.reference_gpu_memory_fraction, options.gpu_memory_fraction};
}

worker::LoadRequest load_request(const Task& task, const EvalOptions& options, const std::string& library,
                                 double gpu_memory_fraction) {
  worker::LoadRequest r;
  r.reference_program = absolute_path(task.path);
  r.library = absolute_path(library);
  r.scale = options.scale;
  r.device = {backend_name(options.backend), gpu_memory_fraction, options.cpu_threads, std::string(precision_name(options.precision))};
  r.cache_bytes = static_cast<int64_t>(options.judge_cache_bytes);
  r.program_name = "candidate";
  return r;
}

std::optional<Failure> attach_arena(WorkerProcess& judge, WorkerProcess& worker, const worker::ArenaLayout& layout, bool cuda,
                                    worker::ArenaOwner owner, double timeout_seconds, const std::string& during) {
  auto made = call(worker, worker::ArenaRequest{layout, 0}, timeout_seconds, during + ": making the input arena");
  if (!made) return made.failure();
  if (!cuda) return std::nullopt;
  if (made->ipc_handle.empty()) {
    return Failure::of(VerdictStatus::kCrash, during + ": the worker's arena reply has no IPC handle", Failure::Cleanup::kill_worker);
  }
  auto adopted = call(judge, worker::AdoptArenaRequest{owner, made->ipc_handle}, timeout_seconds,
                      during + ": the judge mapping the worker's arena");
  if (!adopted) return Failure::of(VerdictStatus::kInternalError, adopted.failure().message, Failure::Cleanup::kill_worker);
  if (!adopted->adopted) {
    return Failure::of(VerdictStatus::kCrash, during + ": " + adopted->message, Failure::Cleanup::kill_worker);
  }
  return std::nullopt;
}

std::unique_ptr<TaskJudge> TaskJudge::open(const Task& task, const EvalOptions& options, Compiler& compiler, WorkerPool& pool) {
  std::unique_ptr<TaskJudge> j(new TaskJudge());
  j->task_id = task.id;
  j->task_dir = std::filesystem::path(absolute_path(task.path)).parent_path().string();
  task.spec.scale_variables(options.scale);  // an unknown scale is bad input, said here
  const CompileResult compiled = compiler.compile({task.program, task.spec.num_args(), options.backend, ""});
  if (!compiled.ok) {
    throw Error(fmt::format("the reference of {} does not compile ({} stage):\n{}", task.id, compiled.stage, compiled.log));
  }
  j->library = compiled.library_path;
  j->secret = options.seed != 0 ? options.seed : fresh_secret();
  j->precision = options.precision;
  j->draws = SecretDraws(j->secret, task.id);
  j->seeds = trial_seeds(j->secret, options.trials, task.id);
  if (task.spec.has_edges()) j->edge_seeds = edge_trial_seeds(j->secret, kEdgeTrials, task.id);
  if (!options.kernelbench_dir.empty()) {
    try {
      j->kernelbench_model = read_kernelbench_module(options.kernelbench_dir, task.id);
    } catch (const IoError& e) {
      throw InputError(fmt::format("--kernelbench: {}", e.what()));
    }
    j->kernelbench_seed = kernelbench_seed_of(j->secret, task.id);
  }
  const bool cpu = options.backend == Backend::cpu;
  if (cpu) {
    j->arena_fd = worker::create_shared_memory("crl-arena", 0);
    j->region_fd = worker::create_shared_memory("crl-outputs", 0);
    j->reference_arena_fd = worker::create_shared_memory("crl-reference-arena", 0);
    j->staging_fd = worker::create_shared_memory("crl-staging", 0);
  }
  // (in the judge at 5, 6, 7 and 8: worker_device.h's fd numbers)
  j->judge = pool.start_judge(cpu ? std::vector<int>{j->arena_fd, j->region_fd, j->reference_arena_fd, j->staging_fd}
                                  : std::vector<int>{});
  // The reference's timing worker loads (LibTorch, CUDA) while the judge makes its outputs.
  auto reference_loaded = j->start_reference_worker(task, options, pool);
  Opening opening(task, options, *j->judge);
  const double opening_share = options.judge_gpu_memory_fraction > 0 ? options.judge_gpu_memory_fraction
                                                                      : options.gpu_memory_budget - reference_load_share(options);
  worker::LoadRequest judge_load = load_request(task, options, j->library, cpu ? 0 : opening_share);
  judge_load.kernelbench_model = j->kernelbench_model;
  judge_load.kernelbench_seed = j->kernelbench_seed;
  const auto loaded = opening.ask(judge_load, "loading the reference");
  j->device_name = loaded.device_name;
  probe_values(*j, task, opening);
  j->timed_against_kernelbench = options.baseline == "kernelbench";
  hold_reference_outputs(*j, opening);
  plan_arenas(*j, task, options, loaded.arguments, opening);
  j->finish_reference_worker(reference_loaded, options);
  return j;
}

std::future<Result<worker::LoadReply>> TaskJudge::start_reference_worker(const Task& task, const EvalOptions& options, WorkerPool& pool) {
  reference_worker = pool.start_program_worker("reference", {task_dir, reference_arena_fd});
  // (shares of the GPU: the reference's worker loads with room for its params, and the memory plan,
  // once the judge measured the reference's call, gives it its own; the judge opens with the budget
  // but for that room; eval/memory_plan.h)
  worker::LoadRequest timing_load = load_request(task, options, pool.library_for(*reference_worker, library),
                                                 options.backend == Backend::cpu ? 0 : reference_load_share(options));
  timing_load.program_name = "reference";
  timing_load.replay_as_graph = options.baseline == "cuda_graph";
  if (options.baseline == "kernelbench") {
    // KernelBench's own Model, from Python, times the reference's half of every pair (bound to the
    // same params as crl's reference by its rule); crl's program still decides what is correct.
    timing_load.program_kind = program_kind_name(ProgramKind::kernelbench);
    timing_load.python_source = kernelbench_model;
    timing_load.python_class = "Model";
    timing_load.origin = fmt::format("KernelBench's module for {}", task.id);
    timing_load.library.clear();
    timing_load.kernelbench_seed = kernelbench_seed;
  }
  WorkerProcess* started = reference_worker.get();
  return std::async(std::launch::async, [started, timing_load, timeout = options.load_timeout_seconds] {
    return call(*started, timing_load, timeout, "loading the reference's timing worker");
  });
}

void TaskJudge::finish_reference_worker(std::future<Result<worker::LoadReply>>& loaded, const EvalOptions& options) {
  const bool cpu = options.backend == Backend::cpu;
  auto ready = loaded.get();
  std::optional<Failure> failed;
  if (!ready) failed = ready.failure();
  if (ready) reference_threads = ready->intra_op_threads;
  if (!failed && !cpu) {
    const auto shared = call(*reference_worker, worker::MemoryShareRequest{memory.reference, -1, false}, options.load_timeout_seconds,
                             "the reference's timing worker's share of the GPU's memory");
    if (!shared) failed = shared.failure();
  }
  if (!failed) {
    failed = attach_arena(*judge, *reference_worker, layout, !cpu, worker::ArenaOwner::reference, options.load_timeout_seconds,
                          "the reference's timing worker");
  }
  if (failed) {
    throw Error(fmt::format("the reference's timing worker for {} failed: {}\n{}", task_id, failed->message,
                            reference_worker->log(options.max_log_bytes)));
  }
}

void TaskJudge::begin_reference_renewal(const Task& task, const EvalOptions& options, WorkerPool& pool) {
  if (options.backend != Backend::cpu || !options.renew_reference_worker || !options.timing || !reference_timed ||
      renewing_.valid()) {
    return;
  }
  reference_worker->stop();
  reference_timed = false;
  renewing_ = start_reference_worker(task, options, pool);
}

void TaskJudge::ready_reference_worker(const EvalOptions& options) {
  if (!renewing_.valid()) return;
  finish_reference_worker(renewing_, options);  // (get() leaves the future empty, thrown or not)
}

TaskJudge::~TaskJudge() {
  if (renewing_.valid()) renewing_.wait();  // its thread talks to the reference's worker
  // The judge first: on the GPU it maps the reference worker's arena, which must outlive the mapping.
  if (judge) judge->stop();
  if (reference_worker) reference_worker->stop();
  worker::unmap_shared_memory(region, region_bytes);
  for (char* map : {arena_map, reference_arena_map, staging_map}) worker::unmap_shared_memory(map, layout.shared_bytes());
  if (staging_fd >= 0) close(staging_fd);
  if (arena_fd >= 0) close(arena_fd);
  if (reference_arena_fd >= 0) close(reference_arena_fd);
  if (region_fd >= 0) close(region_fd);
}

std::string TaskJudge::describe() const {
  return fmt::format(
      "reference held for {} trial seeds{} from secret {} (crl eval --seed {} replays this evaluation); "
      "{} input slots per timed batch{}; {}precision {}: {}; {}{}{}",
      seeds.size(), edge_seeds.empty() ? "" : fmt::format(" and {} edge trials", edge_seeds.size()), secret, secret, layout.slots,
      reference_call_us > 0 ? fmt::format(" (the reference's call: {:.0f} us)", reference_call_us) : "",
      memory.card > 0 ? memory.describe() + "; " : "", precision_name(precision),
      float64_missing.empty() ? "float32 outputs held to the float64 reference" : "no float64 reference (" + float64_missing + ")",
      values_described,
      timed_against_kernelbench ? "; the reference's time is KernelBench's Model's, from Python (baseline kernelbench)" : "",
      kernelbench_seed != 0 ? fmt::format("; parameters by KernelBench's rule: the values of its Model built under seed {}, "
                                          "the same for every call (a ModelNew is built under that seed too)",
                                          kernelbench_seed)
                            : "");
}

}  // namespace crl::eval
