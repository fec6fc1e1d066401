// The load stage (load.h).
#include "eval/stages/load.h"

#include "core/error.h"
#include "eval/worker_call.h"

namespace crl::eval {
namespace {

std::optional<Failure> load_and_attach(Evaluation& e, WorkerPool& pool, const CandidateCode& code, WorkerProcess& worker,
                                       const std::string& loading, const std::string& attaching) {
  worker::LoadRequest request = load_request(e.task, e.options, "", e.options.gpu_memory_fraction);
  if (code.kind == ProgramKind::kernelbench) {
    request.program_kind = program_kind_name(code.kind);
    request.python_source = code.python_source;
    request.origin = code.origin;
    request.library.clear();
  } else {
    try {
      request.library = absolute_path(pool.library_for(worker, code.library));
    } catch (const IoError& error) {  // the scratch folder full or gone: crl's failure, not the program's
      return Failure::of(VerdictStatus::kInternalError, loading + ": " + error.what());
    }
  }
  auto loaded = call(worker, request, e.options.load_timeout_seconds, loading);
  if (!loaded) return loaded.failure();
  return attach_arena(e.judge.process(), worker, e.task_judge.layout, e.cuda(), worker::ArenaOwner::candidate,
                      e.options.load_timeout_seconds, attaching);
}

}  // namespace

std::optional<Failure> load_candidate(Evaluation& e, WorkerPool& pool, const CandidateCode& code, CandidateWorker& w) {
  const auto t = Clock::now();
  w.process = pool.take_candidate_worker(e.task_judge.candidate_place());
  if (auto f = load_and_attach(e, pool, code, *w.process, "loading the candidate", "the candidate's worker")) {
    e.trace.step("load", false, f->message, t);
    return f;
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
