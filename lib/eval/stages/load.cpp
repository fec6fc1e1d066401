// The load stage (load.h).
#include "eval/stages/load.h"

#include <fmt/format.h>

#include "core/error.h"
#include "eval/worker_call.h"

namespace crl::eval {
namespace {

// Rounds of build-and-reload for one candidate: a module whose load_inline calls depend on earlier
// ones' modules asks again after each round.
constexpr int kMaxBuildRounds = 4;
// The compiler's log in the exception a failed load_inline raises (the verdict keeps it whole).
constexpr size_t kMaxErrorBytes = 4000;

std::optional<Failure> load_and_attach(Evaluation& e, WorkerPool& pool, const CandidateCode& code, WorkerProcess& worker,
                                       const std::string& loading, const std::string& attaching,
                                       std::vector<worker::ExtensionBuild>* needs_builds = nullptr) {
  // (its share of the GPU: the task's memory plan, memory_plan.h)
  worker::LoadRequest request = load_request(e.task, e.options, "", e.task_judge.memory.candidate);
  request.device.release_after_requests = e.task_judge.memory.take_turns;
  // KernelBench's rule (0: crl's): a ModelNew is built under the seed; a .crl candidate's worker
  // builds Model for its guards' own arguments.
  request.kernelbench_seed = e.task_judge.kernelbench_seed;
  if (code.kind == ProgramKind::crl) request.kernelbench_model = e.task_judge.kernelbench_model;
  request.value_mix = e.task_judge.value_mix;  // its guards make their inputs as the judge made the trials'
  try {
    if (code.kind == ProgramKind::kernelbench) {
      request.program_kind = program_kind_name(code.kind);
      request.python_source = code.python_source;
      request.origin = code.origin;
      request.library.clear();
      for (size_t i = 0; i < code.extensions.size(); ++i) {
        const auto& built = code.extensions[i];
        if (!built.error.empty()) {
          request.extensions.push_back(built);  // no library: the call raises with the error
          continue;
        }
        request.extensions.push_back(
            {built.key, absolute_path(pool.library_for(worker, built.library, fmt::format("extension-{}.so", i))), ""});
      }
    } else {
      request.library = absolute_path(pool.library_for(worker, code.library));
    }
  } catch (const IoError& error) {  // the scratch folder full or gone: crl's failure, not the program's
    return Failure::of(VerdictStatus::kInternalError, loading + ": " + error.what());
  }
  auto loaded = call(worker, request, e.options.load_timeout_seconds, loading);
  if (!loaded) return loaded.failure();
  if (!loaded->needs_builds.empty()) {
    if (needs_builds == nullptr || code.kind != ProgramKind::kernelbench) {
      return Failure::of(VerdictStatus::kRuntimeError, loading + ": the worker asked for extensions to be built again",
                         Failure::Cleanup::kill_worker);
    }
    *needs_builds = std::move(loaded->needs_builds);
    return std::nullopt;
  }
  return attach_arena(e.judge.process(), worker, e.task_judge.layout, e.cuda(), worker::ArenaOwner::candidate,
                      e.options.load_timeout_seconds, attaching);
}

// Builds the module's load_inline calls with crl's compiler into `code`; compile_error names the one
// that does not compile, with its log in the verdict.
std::optional<Failure> build_extensions(Evaluation& e, const std::vector<worker::ExtensionBuild>& builds, CandidateCode& code) {
  for (const auto& b : builds) {
    const auto t = Clock::now();
    ExtensionRequest r{code.origin, b.name, b.cpp_sources, b.cuda_sources, b.functions, b.bindings, b.extra_cflags,
                       b.extra_cuda_cflags, b.extra_ldflags, e.cuda(), ""};
    const CompileResult built = e.compiler.compile_extension(r);
    e.trace.verdict().compile_log += truncate_log(built.log, e.options.max_log_bytes);
    // A build that fails is the module's to handle, as under torch's load_inline: its call raises
    // with the compiler's log (a module that catches it runs its fallback; one that does not is a
    // compile_error at its import). The step passes: crl did what torch would.
    e.trace.step(fmt::format("compile load_inline '{}'", b.name), true,
                 built.ok ? (built.cache_hit ? "cache hit" : fmt::format("compiled in {:.2f} s", built.seconds))
                          : fmt::format("does not compile ({} stage): the module's load_inline call raises, as torch's would",
                                        built.stage),
                 t);
    if (!built.ok) {
      code.extensions.push_back({b.key, "", fmt::format("{} stage failed:\n{}", built.stage, truncate_log(built.log, kMaxErrorBytes))});
      continue;
    }
    code.extensions.push_back({b.key, built.library_path, ""});
  }
  return std::nullopt;
}

}  // namespace

std::optional<Failure> load_candidate(Evaluation& e, WorkerPool& pool, CandidateCode& code, CandidateWorker& w) {
  const auto t = Clock::now();
  w.process = pool.take_candidate_worker(e.task_judge.candidate_place());
  for (int round = 0;; ++round) {
    std::vector<worker::ExtensionBuild> needs_builds;
    if (auto f = load_and_attach(e, pool, code, *w.process, "loading the candidate", "the candidate's worker", &needs_builds)) {
      e.trace.step("load", false, f->message, t);
      return f;
    }
    if (needs_builds.empty()) break;
    if (round == kMaxBuildRounds) {
      return Failure::of(VerdictStatus::kFormatError,
                         fmt::format("loading the candidate: its module still called load_inline for unbuilt extensions after {} "
                                     "rounds of building them",
                                     kMaxBuildRounds),
                         Failure::Cleanup::kill_worker);
    }
    if (auto f = build_extensions(e, needs_builds, code)) return f;
    // The worker ran the module; a fresh one imports the built extensions.
    w.process->stop();
    w.earlier_logs += w.process->log(e.options.max_log_bytes);
    w.process = pool.start_program_worker("candidate", e.task_judge.candidate_place());
  }
  e.trace.step("load", true, e.options.sandbox ? "sandboxed worker (see its log for what the kernel allowed)" : "worker without sandbox",
               t);
  return std::nullopt;
}

std::optional<Failure> replace_worker(Evaluation& e, WorkerPool& pool, const CandidateCode& code, CandidateWorker& w,
                                      const std::string& kind, const std::string& purpose) {
  // The judge lets go of the old worker's arena (on the GPU that worker's memory) before it ends.
  (void)call(e.judge.process(), worker::DropArenaRequest{worker::ArenaOwner::candidate}, e.options.call_timeout_seconds,
             purpose + ": dropping the arena");
  w.process->stop();
  w.earlier_logs += w.process->log(e.options.max_log_bytes);
  w.process = pool.start_program_worker(kind, e.task_judge.candidate_place());
  return load_and_attach(e, pool, code, *w.process, purpose + ": loading", purpose);
}

}  // namespace crl::eval
