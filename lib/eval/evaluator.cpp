// The evaluation pipeline: the judge -> compile -> load -> trials -> guards -> timing (precise
// enough to reward) -> roofline gate (and its stricter checks) -> re-measure, each a stage of
// lib/eval/stages with typed inputs and outputs; a stage's Failure ends the evaluation and finish()
// makes the verdict of it. The design and its threat model: docs/evaluation.md.
#include "eval/evaluator.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "core/error.h"
#include "core/process_env.h"
#include "eval/failure.h"
#include "eval/judge_client.h"
#include "eval/stages/compile.h"
#include "eval/stages/guards.h"
#include "eval/stages/load.h"
#include "eval/stages/remeasure.h"
#include "eval/stages/roofline_gate.h"
#include "eval/stages/timing.h"
#include "eval/stages/trials.h"
#include "eval/task_judge.h"
#include "eval/timing_stats.h"
#include "eval/trace.h"

namespace crl::eval {
namespace {

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : uint64_t{16} << 30;
}

EvalOptions checked(EvalOptions options) {
  if (options.baseline != "eager" && options.baseline != "cuda_graph" && options.baseline != "kernelbench") {
    throw InputError(fmt::format("baseline must be eager, cuda_graph or kernelbench (got '{}')", options.baseline));
  }
  if (options.baseline == "kernelbench" && options.kernelbench_dir.empty()) {
    throw InputError("baseline kernelbench times the task's KernelBench module: give a checkout (--kernelbench DIR)");
  }
  if (options.baseline == "cuda_graph" && options.backend != Backend::cuda) {
    throw InputError("baseline cuda_graph needs the cuda backend (CUDA graphs replay GPU work)");
  }
  if (options.trials < 1) throw InputError(fmt::format("trials must be at least 1 (got {})", options.trials));
  if (options.time_budget_seconds < 0) throw InputError("the time budget must not be negative");
  if (options.max_slots < 1) throw InputError("max_slots must be at least 1");
  if (!(options.gpu_memory_budget > 0 && options.gpu_memory_budget <= 0.98)) {
    throw InputError(fmt::format("the GPU memory budget must lie in (0, 0.98] of the card (got {})", options.gpu_memory_budget));
  }
  for (const double share : {options.gpu_memory_fraction, options.reference_gpu_memory_fraction, options.judge_gpu_memory_fraction}) {
    if (!(share >= 0 && share <= 1)) throw InputError(fmt::format("a GPU memory fraction must lie in [0, 1], 0 planned per task (got {})", share));
  }
  if (const double sum = options.gpu_memory_fraction + options.reference_gpu_memory_fraction + options.judge_gpu_memory_fraction;
      sum > options.gpu_memory_budget + 1e-9) {
    throw InputError(fmt::format("the GPU memory fractions add up to {:.2f} (candidate {:g}, reference {:g}, judge {:g}); the three "
                                 "processes share one card, so at most the budget {:g} (lower --gpu-memory-fraction, or leave it "
                                 "0: planned per task)",
                                 sum, options.gpu_memory_fraction, options.reference_gpu_memory_fraction, options.judge_gpu_memory_fraction,
                                 options.gpu_memory_budget));
  }
  if (options.max_batch_calls < 1) throw InputError("max_batch_calls must be at least 1");
  if (options.backend == Backend::cuda && options.gpu < 0) throw InputError(fmt::format("gpu must be 0 or more (got {})", options.gpu));
  if (!(options.max_relative_ci > 0)) throw InputError(fmt::format("max_relative_ci must be > 0 (got {})", options.max_relative_ci));
  if (options.strict_trials < 0) throw InputError(fmt::format("strict_trials must be 0 or more (got {})", options.strict_trials));
  if (options.min_batch_us < 0) options.min_batch_us = options.backend == Backend::cuda ? 5000.0 : 0.0;
  if (options.backend == Backend::cpu && options.call_turns && options.cpu_threads == 0) {
    // One core left to the evaluator, which serves the timed calls' turns awake (turn_server.h): with
    // every core given to the programs it competed with their threads, and a 16 us ReLU call on two
    // threads measured 44-100 us, too noisy to reward. LibTorch's own default (the physical cores)
    // where that is fewer.
    options.cpu_threads = std::max(1, std::min(at::get_num_threads(), allowed_cpu_count() - 1));
  }
  if (options.cpu_address_space_limit == 0) options.cpu_address_space_limit = physical_memory_bytes() / 2 + (uint64_t{16} << 30);
  return options;
}

Verdict opening_verdict(const Task& task, const ProgramText& program, const std::string& name, const EvalOptions& options) {
  Verdict v;
  v.task_id = task.id;
  v.candidate = name;
  v.backend = backend_name(options.backend);
  v.scale = options.scale;
  v.baseline = options.baseline;
  v.format = program_kind_name(program.kind);
  v.params = params_rule_name(options);
  return v;
}

// The timing step and the times, speedup and interval it gives the verdict (a measurement too
// noisy to reward fails the step; its interval stays in the verdict, to show how wide it was).
void record_timing(Trace& trace, const Measurement& m, int slots, const Clock::time_point& since) {
  Verdict& v = trace.verdict();
  v.reference_time = summarize_times(m.reference_us);
  v.candidate_time = summarize_times(m.candidate_us);
  v.speedup = m.estimate.speedup;
  v.speedup_ci_low = m.estimate.ci_low;
  v.speedup_ci_high = m.estimate.ci_high;
  trace.step("guard: timed outputs", true,
             fmt::format("in each of {} timed pairs one slot, chosen afterwards, matched the reference with its inputs unchanged",
                         m.candidate_us.size()),
             Clock::now());
  trace.step("timing", !m.too_noisy,
             fmt::format("{} pairs of {} calls in {} rounds, fresh inputs for every call, {}; CI +-{:.2f}%; {}", m.reference_us.size(),
                         slots, m.rounds, m.stop_reason, 100 * m.estimate.relative_half_width(), m.pair_cost),
             since);
}

}  // namespace

Evaluator::Evaluator(EvalOptions options, Compiler& compiler)
    : options_(checked(std::move(options))), compiler_(compiler), pool_(std::make_unique<WorkerPool>(options_, compiler_)) {}

Evaluator::~Evaluator() {
  judge_.reset();  // before the pool: the judge's processes log into the pool's scratch folder
}

Verdict Evaluator::evaluate(const Task& task, const ProgramText& program, const std::string& name) {
  Trace trace(opening_verdict(task, program, name, options_));
  CandidateWorker worker;
  const auto judge = judge_for(task, trace);
  if (!judge) return finish(trace, worker, judge.failure());
  JudgeClient client(*(*judge)->judge, options_.call_timeout_seconds * 4, options_.max_log_bytes, trace);
  Evaluation e{task, options_, **judge, client, trace, compiler_};
  auto compiled = compile_candidate(compiler_, task, program, options_, trace);
  if (!compiled) return finish(trace, worker, compiled.failure());
  if (auto f = load_candidate(e, *pool_, *compiled, worker)) return finish(trace, worker, *f);
  if (auto f = run_trials(e, worker)) return finish(trace, worker, *f);
  if (options_.hack_guards) {
    if (auto f = run_guards(e, worker)) return finish(trace, worker, *f);
  }
  if (!options_.timing) return finish_ok(trace, worker, fmt::format("correct in {} trials (not timed)", trace.verdict().trials_passed));
  const auto t = Clock::now();
  const TimingPlan plan{e.task_judge.layout.slots, options_.min_timed_pairs, options_.time_budget_seconds, "timing",
                        options_.max_relative_ci};
  const auto timed = measure(e, *worker.process, plan);
  if (!timed) return finish(trace, worker, timing_failure(e, timed.failure(), "timing", t));
  record_timing(trace, *timed, e.task_judge.layout.slots, t);
  if (auto f = require_precise(*timed, "the timing")) return finish(trace, worker, *f);
  if (options_.hack_guards && roofline_applies(options_)) {
    if (auto f = roofline_gate(e, worker, trace.verdict().candidate_time.median_us)) return finish(trace, worker, *f);
  }
  if (options_.hack_guards && timed->estimate.speedup > options_.remeasure_above_speedup) {
    if (auto f = remeasure(e, *pool_, *compiled, worker, *timed)) return finish(trace, worker, *f);
  }
  return finish_ok(trace, worker, "");
}

Result<TaskJudge*> Evaluator::judge_for(const Task& task, Trace& trace) {
  const auto t = Clock::now();
  if (!judge_ || !judge_->serves(task)) {
    pool_->drop_spare();  // a spare worker inherited the previous task's arena
    judge_.reset();
    try {
      judge_ = TaskJudge::open(task, options_, compiler_, *pool_);
    } catch (const InputError&) {
      throw;
    } catch (const Error& e) {
      trace.step("judge", false, e.what(), t);
      return Failure::of(VerdictStatus::kInternalError, std::string("crl could not judge this task: ") + e.what(),
                         Failure::Cleanup::drop_judge);
    }
  } else {
    judge_->begin_reference_renewal(task, options_, *pool_);
  }
  trace.verdict().secret = judge_->secret;
  trace.step("judge", true, judge_->describe(), t);
  return judge_.get();
}

Verdict Evaluator::finish(Trace& trace, CandidateWorker& worker, const Failure& failure) {
  Verdict& v = trace.verdict();
  v.status = failure.status;
  v.hack_kind = failure.status == VerdictStatus::kHack ? std::string(hack_kind_name(failure.hack)) : "";
  v.message = failure.message;
  if (failure.out_of_memory && failure.status == VerdictStatus::kRuntimeError && judge_ && judge_->memory.card > 0) {
    // The program ran out of its own share: the verdict says how large that was for this task.
    v.message += "; " + judge_->memory.candidate_share_said();
  }
  v.reward = 0;
  if (failure.cleanup == Failure::Cleanup::drop_judge) judge_.reset();
  if (failure.cleanup == Failure::Cleanup::kill_worker && worker.process) worker.process->kill();
  return close(trace, worker);
}

Verdict Evaluator::finish_ok(Trace& trace, CandidateWorker& worker, std::string message) {
  Verdict& v = trace.verdict();
  v.status = VerdictStatus::kOk;
  v.reward = reward_from_interval(v.speedup, v.speedup_ci_low, v.speedup_ci_high);
  // A timed verdict says its reward and what it was taken from (docs/evaluation.md, "Reward").
  v.message = !message.empty() ? std::move(message)
                                : fmt::format("speedup {:.3f} (95% CI {:.3f}..{:.3f}, +-{:.1f}%); reward {:.2f}, {}", v.speedup,
                                              v.speedup_ci_low, v.speedup_ci_high, 100 * v.speedup_ci_half_width(), v.reward,
                                              reward_basis(v.speedup, v.speedup_ci_low, v.speedup_ci_high));
  return close(trace, worker);
}

Verdict Evaluator::close(Trace& trace, CandidateWorker& worker) {
  Verdict& v = trace.verdict();
  // The judge first lets go of what it maps of the worker (its outputs and, on the GPU, its arena).
  if (judge_ && judge_->judge && judge_->judge->running()) {
    (void)call(*judge_->judge, worker::ReleaseRequest{}, options_.call_timeout_seconds, "releasing");
  }
  if (worker.process) {
    if (worker.process->running()) worker.process->stop();
    v.worker_log = worker.earlier_logs + worker.process->log(options_.max_log_bytes);
    worker.process.reset();
  }
  if (judge_) pool_->keep_spare(judge_->candidate_place());
  v.seconds = trace.seconds();
  return v;
}

void Evaluator::compile_ahead(const Task& task, const ProgramText& candidate) {
  if (candidate.kind == ProgramKind::kernelbench) return;  // nothing to compile
  // The future is dropped: the result lands in the cache (or reaches whoever joins the compile).
  (void)compiler_.submit({candidate, task.spec.num_args(), options_.backend, ""});
}

std::vector<Verdict> Evaluator::evaluate_all(const std::vector<Job>& jobs, size_t ahead, const std::function<void(size_t)>& before_each,
                                             const std::function<void(const Verdict&)>& after_each) {
  std::vector<Verdict> verdicts;
  size_t submitted = 0;  // jobs [0, submitted) were sent to the compile pool
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (before_each) before_each(i);
    for (; submitted < jobs.size() && submitted <= i + ahead; ++submitted) compile_ahead(*jobs[submitted].task, jobs[submitted].program);
    verdicts.push_back(evaluate(*jobs[i].task, jobs[i].program, jobs[i].name));
    if (after_each) after_each(verdicts.back());
  }
  return verdicts;
}

}  // namespace crl::eval
