// What the stages of one evaluation share: the task, the options, the task's judge (its state and
// the typed client of its process), the trace the verdict is built in, and the candidate's worker.
#pragma once

#include <memory>
#include <string>

#include "eval/eval_options.h"
#include "eval/judge_client.h"
#include "eval/task_judge.h"
#include "eval/trace.h"
#include "compile/compiler.h"
#include "eval/worker_process.h"
#include "program/program_text.h"
#include "suite/suite.h"

namespace crl::eval {

struct Evaluation {
  const Task& task;
  const EvalOptions& options;
  TaskJudge& task_judge;
  JudgeClient& judge;
  Trace& trace;
  Compiler& compiler;  // the candidate's, and its load_inline extensions
  bool cuda() const { return options.backend == Backend::cuda; }
};

// What the candidate's worker loads: its compiled library, or a KernelBench-format module's text
// (which only the worker's embedded Python runs).
struct CandidateCode {
  ProgramKind kind = ProgramKind::crl;
  std::string library;        // crl: the compiled library in the cache
  std::string python_source;  // kernelbench
  std::string origin;         // kernelbench: its name in the worker's messages and tracebacks
  // kernelbench: its load_inline calls built by crl's compiler (the load stage adds them), each
  // the worker's key for the call and the library in the cache.
  std::vector<worker::BuiltExtension> extensions;
};

// The candidate's worker through its evaluation: the process now, and the logs of the ones it
// replaced (a re-measure runs in a fresh worker).
struct CandidateWorker {
  std::unique_ptr<WorkerProcess> process;
  std::string earlier_logs;
};

}  // namespace crl::eval
