// The load stage: the candidate's sandboxed worker (the spare one, or a fresh one) with the
// candidate's library (or KernelBench module) loaded and its input arena mapped by the judge.
#pragma once

#include <optional>
#include <string>

#include "eval/failure.h"
#include "eval/stages/evaluation.h"
#include "eval/worker_pool.h"

namespace crl::eval {

// Puts the worker in `w` first, so that a failure's verdict keeps its log. A KernelBench-format
// module whose load_inline calls are not built yet has them built by e.compiler (added to `code`,
// compile_error with the compiler's log when one does not compile) and is loaded in a fresh worker.
std::optional<Failure> load_candidate(Evaluation& e, WorkerPool& pool, CandidateCode& code, CandidateWorker& w);

// Replaces the candidate's worker with a fresh one (log <kind>-<n>.log) that has loaded the
// candidate and made its arena, and nothing else; the old one's log is kept in w.earlier_logs.
std::optional<Failure> replace_worker(Evaluation& e, WorkerPool& pool, const CandidateCode& code, CandidateWorker& w,
                                      const std::string& kind, const std::string& purpose);

}  // namespace crl::eval
