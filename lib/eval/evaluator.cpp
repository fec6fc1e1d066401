// The evaluation pipeline: compile -> reference outputs (trusted reference worker) -> candidate
// worker: load, correctness trials, timing rounds -> verdict. Each stage records a CheckStep.
#include "eval/evaluator.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "core/error.h"
#include "core/hash.h"
#include "eval/guard_symbols.h"
#include "eval/scratch_dir.h"
#include "eval/static_scan.h"
#include "eval/timing_stats.h"
#include "program/task_spec.h"

namespace crl::eval {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

uint64_t mix_seed(uint64_t seed, const std::string& task_id, const std::string& purpose, uint64_t index) {
  Sha256 h;
  h.field(std::to_string(seed)).field(task_id).field(purpose).field(std::to_string(index));
  return std::stoull(h.hex().substr(0, 15), nullptr, 16);
}

// Workers start in their private folder, so every path they are given must be absolute.
std::string absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char* resolved = realpath(path.c_str(), nullptr);
  if (resolved == nullptr) throw_io_error("cannot resolve the path", path);
  std::string out = resolved;
  free(resolved);
  return out;
}

bool file_is_executable(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

std::string self_dir() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return "";
  std::string path(buffer, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : uint64_t{16} << 30;
}

// A failed request to a worker, as the verdict will say it.
struct WorkerFailure {
  VerdictStatus status;
  std::string message;
};

// Sends a request; the reply on success, else what went wrong in verdict terms.
std::variant<Message, WorkerFailure> ask(WorkerProcess& worker, const Message& request, double timeout_seconds,
                                         const std::string& during) {
  try {
    Message reply = worker.request(request, millis(timeout_seconds));
    if (reply.header.value("ok", false)) return reply;
    const std::string error = reply.header.value("error", std::string("(no message)"));
    return WorkerFailure{VerdictStatus::kRuntimeError, fmt::format("{}: {}", during, error)};
  } catch (const ChannelTimeout&) {
    return WorkerFailure{VerdictStatus::kTimeout,
                         fmt::format("{}: no result within {:g} s; the worker was killed", during, timeout_seconds)};
  } catch (const ChannelClosed&) {
    return WorkerFailure{VerdictStatus::kCrash, fmt::format("{}: the worker {}", during, worker.exit().describe())};
  } catch (const InputError& e) {
    return WorkerFailure{VerdictStatus::kCrash, fmt::format("{}: the worker sent a malformed reply ({})", during, e.what())};
  }
}

// Each output's tolerance from its dtype, as the task's spec gives it.
ToleranceForDtype tolerance_for(const Task& task) {
  return [&task](at::ScalarType dtype) {
    const crl::Tolerance tol = task.spec.tolerance_for(dtype);
    return Tolerance{tol.atol, tol.rtol};
  };
}

// Whether a program that computed only the first sample (index 0 along dim 0 of every output
// with two or more) and copied it across the batch would match these reference outputs. False
// when no output has a batch. The per-sample guard runs only where this is true: elsewhere the
// trials already catch copying, and scaling inputs apart could push tasks with narrow input
// ranges (a long cumulative product) to overflow at slightly different places.
bool batch_copy_would_pass(const std::vector<ProgramOutput>& outputs, const ToleranceForDtype& tolerance) {
  bool any_batch = false;
  for (const auto& out : outputs) {
    if (out.values.dim() < 1 || out.values.size(0) < 2) continue;
    any_batch = true;
    // Sample by sample against sample 0, so nothing of the output's size is allocated, and the
    // usual case (samples differ) stops at the first.
    const std::vector<ProgramOutput> first{{out.values.narrow(0, 0, 1), out.device}};
    for (int64_t b = 1; b < out.values.size(0); ++b) {
      if (!compare_outputs({{out.values.narrow(0, b, 1), out.device}}, first, tolerance).ok) return false;
    }
  }
  return any_batch;
}

}  // namespace

std::string find_worker_executable() {
  if (const char* env = std::getenv("CRL_WORKER"); env != nullptr && file_is_executable(env)) return env;
  const std::string dir = self_dir();
  for (const std::string& candidate : {dir + "/crl-worker", dir + "/../crl-worker/crl-worker"}) {
    if (file_is_executable(candidate)) return candidate;
  }
#ifdef CRL_WORKER_BUILD_PATH
  if (file_is_executable(CRL_WORKER_BUILD_PATH)) return CRL_WORKER_BUILD_PATH;
#endif
  throw Error("cannot find the crl-worker executable (set CRL_WORKER, or build the crl-worker target)");
}

std::vector<uint64_t> trial_seeds(const EvalOptions& options, const std::string& task_id) {
  std::vector<uint64_t> seeds;
  for (int i = 0; i < options.trials; ++i) seeds.push_back(mix_seed(options.seed, task_id, "trial", static_cast<uint64_t>(i)));
  return seeds;
}

uint64_t timing_input_seed(const EvalOptions& options, const std::string& task_id, const std::string& measurement,
                           int round) {
  // Rounds are far apart (pair i of a round uses this seed + i).
  return mix_seed(options.seed, task_id, "timing-" + measurement, static_cast<uint64_t>(round));
}

// The trusted side of one task: its compiled reference, its worker, and its outputs per trial.
struct Evaluator::ReferenceState {
  std::string task_id;
  std::string library;
  std::vector<uint64_t> seeds;
  std::vector<std::vector<ProgramOutput>> outputs;  // per trial seed
  // The per-sample guard: outputs for the first trial seed with each sample's inputs scaled apart
  // (program/arguments.h, spread_samples); empty when the task has no input to spread.
  std::vector<ProgramOutput> spread_outputs;
};

Evaluator::Evaluator(EvalOptions options, Compiler& compiler) : options_(std::move(options)), compiler_(compiler) {
  if (options_.trials < 1) throw InputError(fmt::format("trials must be at least 1 (got {})", options_.trials));
  if (options_.time_budget_seconds < 0) throw InputError("the time budget must not be negative");
  worker_executable_ = options_.worker_executable.empty() ? find_worker_executable() : options_.worker_executable;
  if (options_.cpu_address_space_limit == 0) {
    options_.cpu_address_space_limit = physical_memory_bytes() / 2 + (uint64_t{16} << 30);
  }
  scratch_ = std::make_unique<ScratchDir>("crl-eval-", options_.scratch_parent);
}

Evaluator::~Evaluator() = default;

std::unique_ptr<WorkerProcess> Evaluator::start_worker(const std::string& log_name) {
  WorkerOptions w;
  w.executable = worker_executable_;
  w.log_path = scratch_->file(log_name);
  w.environment = clean_worker_environment(scratch_->path());
  if (options_.backend == Backend::cpu) w.address_space_limit = options_.cpu_address_space_limit;
  w.working_dir = scratch_->path();
  return std::make_unique<WorkerProcess>(std::move(w));
}

nlohmann::json Evaluator::load_request(const Task& task, const std::string& reference_library,
                                       const std::string& candidate_library, double gpu_memory_fraction) const {
  return {{"op", "load"},
          {"reference_program", absolute(task.path)},
          {"reference_library", absolute(reference_library)},
          {"candidate_library", absolute(candidate_library)},
          {"scale", options_.scale},
          {"device", backend_name(options_.backend)},
          {"gpu_memory_fraction", gpu_memory_fraction},
          {"cpu_threads", options_.cpu_threads}};
}

Evaluator::ReferenceState& Evaluator::reference_for(const Task& task) {
  if (reference_ && reference_->task_id == task.id) return *reference_;
  reference_.reset();
  auto state = std::make_unique<ReferenceState>();
  state->task_id = task.id;
  task.spec.scale_variables(options_.scale);  // an unknown scale is bad input, said here
  const CompileResult compiled = compiler_.compile({task.program, task.spec.num_args(), options_.backend, ""});
  if (!compiled.ok) {
    throw Error(fmt::format("the reference of {} does not compile ({} stage):\n{}", task.id, compiled.stage, compiled.log));
  }
  state->library = compiled.library_path;
  state->seeds = trial_seeds(options_, task.id);
  auto worker = start_worker("reference.log");
  auto fail = [&](const WorkerFailure& f) -> ReferenceState& {
    throw Error(fmt::format("the reference of {} failed: {}\n{}", task.id, f.message, worker->log(options_.max_log_bytes)));
  };
  auto loaded = ask(*worker, Message{load_request(task, state->library, "", 0.25), {}}, options_.load_timeout_seconds,
                    "loading the reference");
  if (auto* f = std::get_if<WorkerFailure>(&loaded)) return fail(*f);
  for (uint64_t seed : state->seeds) {
    auto reply = ask(*worker, Message{{{"op", "run"}, {"program", "reference"}, {"seed", seed}}, {}},
                     options_.call_timeout_seconds, fmt::format("reference run (seed {})", seed));
    if (auto* f = std::get_if<WorkerFailure>(&reply)) return fail(*f);
    state->outputs.push_back(std::move(std::get<Message>(reply).tensors));
  }
  if (batch_copy_would_pass(state->outputs[0], tolerance_for(task))) {
    auto reply = ask(*worker,
                     Message{{{"op", "run"}, {"program", "reference"}, {"seed", state->seeds[0]}, {"spread_samples", true}}, {}},
                     options_.call_timeout_seconds, "reference run with samples scaled apart");
    if (auto* f = std::get_if<WorkerFailure>(&reply)) return fail(*f);
    if (std::get<Message>(reply).header.value("spread_inputs", 0) > 0) {
      state->spread_outputs = std::move(std::get<Message>(reply).tensors);
    }
  }
  worker->stop();
  reference_ = std::move(state);
  return *reference_;
}

void Evaluator::compile_ahead(const Task& task, const ProgramText& candidate) {
  // The future is dropped: the result lands in the cache (or reaches whoever joins the compile).
  (void)compiler_.submit({candidate, task.spec.num_args(), options_.backend, ""});
}

std::vector<Verdict> Evaluator::evaluate_all(const std::vector<Job>& jobs, size_t ahead,
                                             const std::function<void(size_t)>& before_each) {
  std::vector<Verdict> verdicts;
  size_t submitted = 0;  // jobs [0, submitted) were sent to the compile pool
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (before_each) before_each(i);
    for (; submitted < jobs.size() && submitted <= i + ahead; ++submitted) {
      compile_ahead(*jobs[submitted].task, jobs[submitted].program);
    }
    verdicts.push_back(evaluate(*jobs[i].task, jobs[i].program, jobs[i].name));
  }
  return verdicts;
}

Verdict Evaluator::evaluate(const Task& task, const ProgramText& candidate, const std::string& candidate_name) {
  const auto start = Clock::now();
  Verdict v;
  v.task_id = task.id;
  v.candidate = candidate_name;
  v.backend = backend_name(options_.backend);
  v.scale = options_.scale;
  auto finish = [&](VerdictStatus status, std::string message) {
    v.status = status;
    v.message = std::move(message);
    v.reward = status == VerdictStatus::kOk ? reward_from_speedup(v.speedup) : 0.0;
    if (!spare_ || !spare_->running()) spare_ = start_worker(fmt::format("candidate-{}.log", workers_started_++));
    v.seconds = seconds_since(start);
    return v;
  };
  auto step = [&](std::string name, bool passed, std::string detail, Clock::time_point since) {
    v.steps.push_back({std::move(name), passed, std::move(detail), seconds_since(since)});
  };

  // 1. Compile (the reference first: its failure is crl's problem, not the candidate's).
  ReferenceState& reference = reference_for(task);
  auto t = Clock::now();
  // Through the pool, so that a compile started by compile_ahead() is joined, not repeated.
  const CompileResult compiled = compiler_.submit({candidate, task.spec.num_args(), options_.backend, ""}).get();
  v.compile_log = truncate_log(compiled.log, options_.max_log_bytes);
  step("compile", compiled.ok,
       compiled.ok ? (compiled.cache_hit ? "cache hit" : fmt::format("compiled in {:.2f} s", compiled.seconds))
                   : fmt::format("failed at the {} stage", compiled.stage),
       t);
  if (!compiled.ok) {
    return finish(VerdictStatus::kCompileError, fmt::format("does not compile ({} stage)", compiled.stage));
  }
  auto hack = [&](const std::string& kind, std::string message) {
    v.hack_kind = kind;
    return finish(VerdictStatus::kHack, std::move(message));
  };
  if (options_.hack_guards) {
    // Timer tampering: the symbols of the program's own objects. The static scan is for the report only.
    t = Clock::now();
    const auto symbols =
        scan_symbols(compiled.object_paths.empty() ? std::vector<std::string>{compiled.library_path} : compiled.object_paths);
    step("guard: symbols", symbols.empty(), symbols.empty() ? "no timing, allocation or loader symbols" : describe(symbols), t);
    t = Clock::now();
    std::vector<ScanFinding> scan;
    for (const SourceSection* section : {&candidate.device, &candidate.host}) {
      for (auto f : static_scan(section->text)) {
        f.line += std::max(section->first_line, 1) - 1;
        scan.push_back(std::move(f));
      }
    }
    step("static scan (report only)", true, describe(scan), t);
    if (!symbols.empty()) return hack("timer_tampering", "the program " + describe(symbols));
  }

  // 2. A fresh worker for this candidate; the reference runs beside it only for timing.
  t = Clock::now();
  std::unique_ptr<WorkerProcess> worker = std::move(spare_);
  if (!worker || !worker->running()) worker = start_worker(fmt::format("candidate-{}.log", workers_started_++));
  auto fail = [&](const WorkerFailure& f) {
    worker->kill();
    v.worker_log = worker->log(options_.max_log_bytes);
    return finish(f.status, f.message);
  };
  auto loaded = ask(*worker, Message{load_request(task, reference.library, compiled.library_path,
                                                  options_.gpu_memory_fraction), {}},
                    options_.load_timeout_seconds, "loading the candidate");
  step("load", std::holds_alternative<Message>(loaded), "", t);
  if (auto* f = std::get_if<WorkerFailure>(&loaded)) return fail(*f);

  // 3. Correctness: every trial on inputs from its own seed, compared here with the reference's.
  const ToleranceForDtype tolerance_for = crl::eval::tolerance_for(task);
  for (size_t i = 0; i < reference.seeds.size(); ++i) {
    t = Clock::now();
    const std::string name = fmt::format("trial {}", i + 1);
    auto reply = ask(*worker, Message{{{"op", "run"}, {"program", "candidate"}, {"seed", reference.seeds[i]}}, {}},
                     options_.call_timeout_seconds, fmt::format("{} (seed {})", name, reference.seeds[i]));
    v.trials_run = static_cast<int>(i + 1);
    if (auto* f = std::get_if<WorkerFailure>(&reply)) {
      step(name, false, f->message, t);
      return fail(*f);
    }
    const ComparisonResult cmp = compare_outputs(reference.outputs[i], std::get<Message>(reply).tensors, tolerance_for);
    step(name, cmp.ok, cmp.ok ? fmt::format("max abs error {:.3g}", cmp.max_abs_error) : cmp.message, t);
    if (!cmp.ok) {
      worker->stop();
      v.worker_log = worker->log(options_.max_log_bytes);
      return finish(VerdictStatus::kMismatch, fmt::format("{} (seed {}): {}", name, reference.seeds[i], cmp.message));
    }
    v.trials_passed = v.trials_run;
  }
  // Hack guards in the same worker: threads and deferred work, aliasing, input mutation, caches,
  // stale memory (guard_probe.h); runs are compared here with the trusted reference's outputs.
  if (options_.hack_guards) {
    t = Clock::now();
    const size_t seed_b = reference.seeds.size() > 1 ? 1 : 0;
    std::vector<int64_t> output_bytes;
    for (const auto& out : reference.outputs[0]) output_bytes.push_back(static_cast<int64_t>(out.values.nbytes()));
    auto reply = ask(*worker,
                     Message{{{"op", "guard"},
                              {"seeds", {reference.seeds[0], reference.seeds[seed_b]}},
                              {"output_bytes", output_bytes},
                              {"settle_seconds", options_.guard_settle_seconds}},
                             {}},
                     options_.call_timeout_seconds * 8, "hack guards");
    if (auto* f = std::get_if<WorkerFailure>(&reply)) {
      step("guards", false, f->message, t);
      return fail(*f);
    }
    const Message& probes = std::get<Message>(reply);
    std::string hack_kind;
    std::string hack_message;
    try {
      for (const auto& check : probes.header.at("checks")) {
        const bool passed = check.at("passed").get<bool>();
        step("guard: " + check.at("name").get<std::string>(), passed, check.at("detail").get<std::string>(), t);
        if (!passed && hack_kind.empty()) {
          hack_kind = check.at("kind").get<std::string>();
          hack_message = check.at("name").get<std::string>() + ": " + check.at("detail").get<std::string>();
        }
      }
      size_t next = 0;
      for (const auto& group : probes.header.at("groups")) {
        const size_t count = group.at("count").get<size_t>();
        const size_t seed_index = group.at("seed_index").get<size_t>() == 0 ? 0 : seed_b;
        if (next + count > probes.tensors.size()) throw InputError("guard reply has fewer tensors than its groups");
        const std::vector<ProgramOutput> outputs(probes.tensors.begin() + static_cast<std::ptrdiff_t>(next),
                                                 probes.tensors.begin() + static_cast<std::ptrdiff_t>(next + count));
        next += count;
        const ComparisonResult cmp = compare_outputs(reference.outputs[seed_index], outputs, tolerance_for);
        const std::string name = "guard: " + group.at("name").get<std::string>();
        step(name, cmp.ok, cmp.ok ? fmt::format("matches the reference (max abs error {:.3g})", cmp.max_abs_error) : cmp.message, t);
        if (!cmp.ok && hack_kind.empty()) {
          hack_kind = group.at("kind").get<std::string>();
          hack_message = name.substr(7) + ": " + cmp.message;
        }
      }
    } catch (const std::exception& e) {
      return fail({VerdictStatus::kCrash, fmt::format("hack guards: malformed reply ({})", e.what())});
    }
    if (!hack_kind.empty()) {
      worker->stop();
      v.worker_log = worker->log(options_.max_log_bytes);
      return hack(hack_kind, hack_message);
    }
    // Per-sample guard: the first trial again, with each sample's inputs scaled by its own factor.
    // A program that is right on the task's inputs but not on these computed one sample's result
    // and copied it (or otherwise relied on every sample looking alike).
    if (!reference.spread_outputs.empty()) {
      t = Clock::now();
      auto spread = ask(*worker,
                        Message{{{"op", "run"}, {"program", "candidate"}, {"seed", reference.seeds[0]}, {"spread_samples", true}},
                                {}},
                        options_.call_timeout_seconds, "samples scaled apart");
      if (auto* f = std::get_if<WorkerFailure>(&spread)) {
        step("guard: samples scaled apart", false, f->message, t);
        return fail(*f);
      }
      const ComparisonResult cmp = compare_outputs(reference.spread_outputs, std::get<Message>(spread).tensors, tolerance_for);
      step("guard: samples scaled apart", cmp.ok,
           cmp.ok ? fmt::format("matches the reference (max abs error {:.3g})", cmp.max_abs_error) : cmp.message, t);
      if (!cmp.ok) {
        worker->stop();
        v.worker_log = worker->log(options_.max_log_bytes);
        return hack("batch_copy", "right on the task's inputs, wrong when each sample's inputs are scaled by its own "
                                  "factor (one sample's result copied across the batch?): " + cmp.message);
      }
    }
  }
  if (!options_.timing) {
    worker->stop();
    v.worker_log = worker->log(options_.max_log_bytes);
    return finish(VerdictStatus::kOk, fmt::format("correct in {} trials (not timed)", v.trials_passed));
  }

  // 4. Timing: rounds of interleaved pairs until the speedup's CI is narrow enough or the budget is spent.
  t = Clock::now();
  std::vector<double> reference_us;
  std::vector<double> candidate_us;
  SpeedupEstimate estimate;
  int pairs = std::max(1, options_.pairs_per_round);
  int round = 0;
  std::string stop_reason;
  for (;;) {
    const auto round_start = Clock::now();
    // A round may take what the budget has left, with room for slow first calls and warm-up.
    const double round_timeout = options_.call_timeout_seconds * (2 + options_.warmup_calls) + options_.time_budget_seconds * 2;
    auto reply = ask(*worker,
                     Message{{{"op", "time"},
                              {"input_seed", timing_input_seed(options_, task.id, "first", round)},
                              {"pairs", pairs},
                              {"warmup", options_.warmup_calls},
                              {"order_seed", mix_seed(options_.seed, task.id, "order", static_cast<uint64_t>(round))},
                              {"flush", true}},
                             {}},
                     round_timeout, fmt::format("timing round {}", round + 1));
    if (auto* f = std::get_if<WorkerFailure>(&reply)) {
      step("timing", false, f->message, t);
      return fail(*f);
    }
    const auto& header = std::get<Message>(reply).header;
    if (header.contains("timed_mismatch")) {
      const std::string detail = header["timed_mismatch"].is_string() ? header["timed_mismatch"].get<std::string>() : "";
      step("guard: timed outputs", false, detail, t);
      worker->stop();
      v.worker_log = worker->log(options_.max_log_bytes);
      return hack("timed_output_mismatch", "correct in the trials, wrong while timed: " + detail);
    }
    try {
      const auto ref = header.at("reference_us").get<std::vector<double>>();
      const auto cand = header.at("candidate_us").get<std::vector<double>>();
      if (ref.size() != static_cast<size_t>(pairs) || cand.size() != ref.size()) throw InputError("wrong number of times");
      for (double x : ref) reference_us.push_back(x);
      for (double x : cand) candidate_us.push_back(x);
    } catch (const std::exception& e) {
      step("timing", false, e.what(), t);
      return fail({VerdictStatus::kCrash, fmt::format("timing round {}: malformed reply ({})", round + 1, e.what())});
    }
    ++round;
    estimate = estimate_speedup(reference_us, candidate_us, 1000, mix_seed(options_.seed, task.id, "bootstrap", 0));
    const int total = static_cast<int>(reference_us.size());
    const double spent = seconds_since(t);
    if (total >= options_.min_timed_pairs && estimate.relative_half_width() <= options_.target_relative_ci) {
      stop_reason = "CI target reached";
      break;
    }
    // The budget ends timing only once the minimum number of pairs is in: a first round slowed by
    // input generation and warm-up must not leave a verdict with a handful of samples.
    if (spent >= options_.time_budget_seconds && total >= options_.min_timed_pairs) {
      stop_reason = "time budget spent";
      break;
    }
    if (total >= options_.max_timed_pairs) {
      stop_reason = "pair limit reached";
      break;
    }
    // Size the next round to about a quarter of the budget left (at least one pair).
    const double per_pair = std::max(seconds_since(round_start) / pairs, 1e-7);
    const double left = std::max(options_.time_budget_seconds - spent, 0.0);
    const int still_needed = std::max(options_.min_timed_pairs - total, 1);
    pairs = static_cast<int>(std::clamp(left / 4 / per_pair, static_cast<double>(still_needed),
                                        static_cast<double>(std::max(options_.max_timed_pairs - total, 1))));
  }
  worker->stop();
  v.worker_log = worker->log(options_.max_log_bytes);
  v.reference_time = summarize_times(reference_us);
  v.candidate_time = summarize_times(candidate_us);
  v.speedup = estimate.speedup;
  v.speedup_ci_low = estimate.ci_low;
  v.speedup_ci_high = estimate.ci_high;
  step("guard: timed outputs", true,
       fmt::format("the candidate's outputs of all {} timed calls agreed with the reference's on the same inputs",
                   candidate_us.size()),
       Clock::now());
  step("timing", true,
       fmt::format("{} pairs in {} rounds, fresh inputs for every pair, {}; CI +-{:.2f}%", reference_us.size(), round,
                   stop_reason, 100 * estimate.relative_half_width()),
       t);
  // A large speedup is re-measured by another method (host wall clock around full device syncs)
  // in a fresh worker before it is believed.
  if (options_.hack_guards && v.speedup > options_.remeasure_above_speedup) {
    t = Clock::now();
    auto again = start_worker(fmt::format("remeasure-{}.log", workers_started_++));
    auto reloaded = ask(*again, Message{load_request(task, reference.library, compiled.library_path,
                                                     options_.gpu_memory_fraction), {}},
                        options_.load_timeout_seconds, "re-measuring: loading");
    std::variant<Message, WorkerFailure> timed = reloaded;
    if (std::holds_alternative<Message>(reloaded)) {
      timed = ask(*again,
                  Message{{{"op", "time"},
                           {"input_seed", timing_input_seed(options_, task.id, "remeasure", 0)},
                           {"pairs", std::max(options_.min_timed_pairs, 20)},
                           {"warmup", options_.warmup_calls},
                           {"order_seed", mix_seed(options_.seed, task.id, "remeasure", 0)},
                           {"flush", true}},
                          {}},
                  options_.call_timeout_seconds * (2 + options_.warmup_calls) + options_.time_budget_seconds * 4,
                  "re-measuring");
    }
    if (auto* f = std::get_if<WorkerFailure>(&timed)) {
      step("guard: re-measure", false, f->message, t);
      again->kill();
      return fail(*f);
    }
    again->stop();
    double remeasured = 0;
    if (std::get<Message>(timed).header.contains("timed_mismatch")) {
      const auto& detail = std::get<Message>(timed).header["timed_mismatch"];
      step("guard: re-measure", false, detail.is_string() ? detail.get<std::string>() : "", t);
      return hack("timed_output_mismatch",
                  "wrong while re-measured: " + (detail.is_string() ? detail.get<std::string>() : std::string()));
    }
    try {
      const auto& header = std::get<Message>(timed).header;
      const auto ref_wall = summarize_times(header.at("reference_wall_us").get<std::vector<double>>());
      const auto cand_wall = summarize_times(header.at("candidate_wall_us").get<std::vector<double>>());
      remeasured = cand_wall.median_us > 0 ? ref_wall.median_us / cand_wall.median_us : 0;
    } catch (const std::exception& e) {
      return fail({VerdictStatus::kCrash, fmt::format("re-measuring: malformed reply ({})", e.what())});
    }
    const double disagreement = remeasured > 0 ? std::max(v.speedup / remeasured, remeasured / v.speedup) : INFINITY;
    const bool agrees = disagreement <= options_.remeasure_max_disagreement;
    const std::string detail = fmt::format("speedup {:.3f} re-measured by wall clock in a fresh worker: {:.3f} ({:.2f}x apart)",
                                           v.speedup, remeasured, disagreement);
    step("guard: re-measure", agrees, detail, t);
    if (!agrees) return hack("remeasure_disagreement", detail);
  }
  return finish(VerdictStatus::kOk,
                fmt::format("speedup {:.3f} (95% CI {:.3f}..{:.3f})", v.speedup, v.speedup_ci_low, v.speedup_ci_high));
}

}  // namespace crl::eval
