// An evaluator rank: its GPU, compiler and Evaluator serving rank 0's programs (evaluator_rank.h).
#include "rl/evaluator_rank.h"

#include "compile/compiler.h"
#include "core/process_env.h"
#include "eval/evaluator.h"
#include "program/program_text.h"
#include "rl/stop_request.h"

#if CRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace crl::rl {

StopNotice EvaluatorRank::run() {
  const JobConfig& job = context_.job;
  const int share = core_share(roles_.local_size);
  int gpu = 0;  // the rank's GPU among those it sees: its judge and workers see that one alone
#if CRL_HAVE_CUDA
  if (job.backend == "cuda") {
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
      gpu = dist::gpu_for_local_rank(roles_.local_rank, count);
      cudaSetDevice(gpu);
    }
  }
#endif
  CompilerOptions compiler_options;
  compiler_options.jobs = static_cast<size_t>(share);  // the node's cores are shared by its ranks
  Compiler compiler(compiler_options);
  eval::EvalOptions options;
  options.backend = parse_backend(job.backend);
  options.scale = job.eval.scale;
  options.trials = job.eval.trials;
  // No options.seed: each judged task draws a fresh secret (a verdict's log names it). The job's
  // seed made it job.seed + 1 for every task of every run (1 by default), and whoever knows the
  // secret knows each timed pair's checked slot before the batch: a program that computed only those
  // slots passed at the batch's size times its speed (AttackTest.AKnownSecretNamesTheCheckedSlots).
  options.timing = job.eval.timing;
  options.precision = parse_precision(job.eval.precision);
  options.time_budget_seconds = job.eval.time_budget;
  options.call_timeout_seconds = job.eval.call_timeout;
  options.max_relative_ci = job.eval.max_relative_ci;
  options.cpu_threads = share;
  options.gpu = gpu;
  eval::Evaluator evaluator(options, compiler);
  return evaluator_loop(
      dist::Group::world(),
      [&](const WorkItem& w) {
        const Task& task = context_.suite.find(w.task);
        // The job's programs are all of its program_format (rank 0 parsed each so before sending it).
        const ProgramText program =
            job.program_format == ProgramKind::kernelbench ? parse_kernelbench_text(w.program, w.name) : parse_program_text(w.program, w.name);
        return evaluator.evaluate(task, program, w.name);
      },
      stop_signal);
}

}  // namespace crl::rl
