// Evaluation engine benchmarks: evaluations per minute on a fixed mixed set of 20 candidates
// (cold compile + correctness + timing) and on a group of 16 correct ones, and repeatability (one
// candidate judged 5 times).
// Build: cmake --build build --target bench_eval. Run: build/bench/bench_eval
// Backend: CUDA (full scale) when a GPU is visible, else CPU (small scale); CRL_BENCH_BACKEND=cpu|cuda
// overrides. The suite is tests/data/eval/suite (ReLU), candidates tests/data/eval/relu.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <fcntl.h>
#include <unistd.h>
#include <thread>

#if CRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "compile/compiler.h"
#include "core/clock.h"
#include "eval/evaluator.h"
#include "worker/output_comparison.h"
#include "eval/scratch_dir.h"
#include "worker/protocol.h"
#include "worker/worker_channel.h"
#include "eval/timing_stats.h"
#include "program/program_text.h"
#include "suite/suite.h"

namespace crl::eval {
namespace {

const std::string kFixtures = std::string(CRL_SOURCE_DIR) + "/tests/data/eval";

Backend bench_backend() {
  if (const char* env = std::getenv("CRL_BENCH_BACKEND")) return parse_backend(env);
#if CRL_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) return Backend::cuda;
#endif
  return Backend::cpu;
}

EvalOptions bench_options(Backend backend) {
  EvalOptions o;
  o.backend = backend;
  o.scale = backend == Backend::cuda ? "full" : "small";
  o.trials = 5;
  o.time_budget_seconds = backend == Backend::cuda ? 5 : 2;
  // CRL_BENCH_TIME_BUDGET overrides the timing budget (seconds per candidate), for short runs.
  if (const char* budget = std::getenv("CRL_BENCH_TIME_BUDGET")) o.time_budget_seconds = std::stod(budget);
  o.call_timeout_seconds = 30;
  o.worker_executable = CRL_WORKER_EXE;
  return o;
}

const Task& relu_task() {
  static const Suite suite = Suite::load(kFixtures + "/suite");
  return suite.find("level1/019_relu");
}

// An evaluator with its own empty compile cache and the precompiled prelude built (as on a node
// that has been up a while), so every candidate below is a cold compile.
struct ColdCacheEvaluator {
  ColdCacheEvaluator() : compiler(cache_options(cache)) {
    compiler.prepare(backend);
    evaluator.emplace(bench_options(backend), compiler);
  }
  static CompilerOptions cache_options(const ScratchDir& dir) {
    CompilerOptions co;
    co.cache_dir = dir.path();
    return co;
  }
  Backend backend = bench_backend();
  ScratchDir cache{"crl-bench-eval-cache-"};
  Compiler compiler;
  std::optional<Evaluator> evaluator;
};

// The fixed mix: mostly correct programs (as a policy's later samples are), some failures of each kind.
const std::vector<std::pair<std::string, int>> kMix = {
    {"same_as_reference", 5}, {"device_loop", 6}, {"slower", 2}, {"wrong_values", 2}, {"wrong_shape", 1},
    {"nan_output", 1},        {"does_not_compile", 1}, {"throws", 1}, {"segfault", 1}};

// Evaluates the 20-candidate mix; every candidate's text gets a unique comment, so each is a cold
// compile (the precompiled prelude is built once beforehand, as on a node that has been up a while).
// Argument: candidates compiled ahead of the one being judged (0: one at a time; crl eval uses 8
// on CUDA).
void BM_EvaluationsPerMinute(benchmark::State& state) {
  const size_t window = static_cast<size_t>(state.range(0));
  ColdCacheEvaluator cold;
  const Backend backend = cold.backend;
  Evaluator& evaluator = *cold.evaluator;
  // The reference's outputs are computed once per task; warm that up outside the measurement.
  evaluator.evaluate(relu_task(), load_program_file(kFixtures + "/relu/same_as_reference.crl"), "warm-up");
  int round = 0;
  std::map<std::string, int> statuses;
  double seconds = 0;
  for (auto _ : state) {
    std::vector<Evaluator::Job> jobs;
    for (const auto& [name, copies] : kMix) {
      for (int c = 0; c < copies; ++c) {
        ProgramText program = load_program_file(kFixtures + "/relu/" + name + ".crl");
        program.host.text += fmt::format("// bench variant {} {}\n", round, jobs.size());
        jobs.push_back({&relu_task(), std::move(program), name});
      }
    }
    const auto start = std::chrono::steady_clock::now();
    for (const Verdict& v : evaluator.evaluate_all(jobs, window)) ++statuses[v.status_text()];
    seconds += crl::seconds_since(start);
    ++round;
  }
  state.counters["evaluations_per_minute"] = 60.0 * 20 * round / seconds;
  state.counters["seconds_per_evaluation"] = seconds / (20.0 * round);
  for (const auto& [status, count] : statuses) state.counters["n_" + status] = count;
  state.SetLabel(fmt::format("{} backend, {} scale, {} s timing budget, {} compiled ahead", backend_name(backend),
                             bench_options(backend).scale, bench_options(backend).time_budget_seconds, window));
}
BENCHMARK(BM_EvaluationsPerMinute)->Arg(0)->Arg(8)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

// A group as the job judges it: 16 correct candidates of one task (level1/019_relu) in a row, each
// a cold compile, 8 compiled ahead; the reference's outputs are reused across the group.
void BM_GroupOfSixteen(benchmark::State& state) {
  ColdCacheEvaluator cold;
  const Backend backend = cold.backend;
  Evaluator& evaluator = *cold.evaluator;
  int ok = 0;
  double seconds = 0;
  for (auto _ : state) {
    const ProgramText kernel = load_program_file(kFixtures + "/relu/device_loop.crl");
    std::vector<Evaluator::Job> jobs;
    for (int c = 0; c < 16; ++c) {
      ProgramText program = kernel;
      program.host.text += fmt::format("// group variant {}\n", c);
      jobs.push_back({&relu_task(), std::move(program), "device_loop"});
    }
    const auto start = std::chrono::steady_clock::now();
    for (const Verdict& v : evaluator.evaluate_all(jobs, 8)) ok += v.ok() ? 1 : 0;
    seconds += crl::seconds_since(start);
  }
  state.counters["evaluations_per_minute"] = 60.0 * 16 / seconds;
  state.counters["seconds_per_evaluation"] = seconds / 16;
  state.counters["n_ok"] = ok;
  state.SetLabel(fmt::format("{} backend, {} scale, {} s timing budget, first judge included", backend_name(backend),
                             bench_options(backend).scale, bench_options(backend).time_budget_seconds));
}
BENCHMARK(BM_GroupOfSixteen)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

// One candidate judged 5 times by one evaluator: the spread of its speedup, (max - min) / median,
// and the seconds an evaluation takes. Second argument: the calls of CPU timed batches take turns
// (1, `crl eval --call-turns`) or not (0, the default; worker/call_turns.h).
void BM_Repeatability(benchmark::State& state) {
  const Backend backend = bench_backend();
  ScratchDir cache("crl-bench-eval-cache-");
  CompilerOptions co;
  co.cache_dir = cache.path();
  Compiler compiler(co);
  EvalOptions options = bench_options(backend);
  options.call_turns = state.range(1) != 0;
  Evaluator evaluator(options, compiler);
  const std::string name = state.range(0) == 0 ? "same_as_reference" : "device_loop";
  const ProgramText program = load_program_file(kFixtures + "/relu/" + name + ".crl");
  std::vector<double> speedups;
  std::vector<double> half_widths;
  double reference_us = 0;
  (void)evaluator.evaluate(relu_task(), program, "warm-up");  // the task's judge opened outside the measurement
  double seconds = 0;
  for (auto _ : state) {
    for (int i = 0; i < 5; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const Verdict v = evaluator.evaluate(relu_task(), program, name);
      seconds += crl::seconds_since(start);
      if (!v.ok()) {
        state.SkipWithError(("candidate not ok: " + v.message).c_str());
        return;
      }
      speedups.push_back(v.speedup);
      half_widths.push_back((v.speedup_ci_high - v.speedup_ci_low) / 2 / v.speedup);
      reference_us = v.reference_time.median_us;
    }
  }
  const double mid = median(speedups);
  state.counters["speedup_median"] = mid;
  state.counters["speedup_min"] = *std::min_element(speedups.begin(), speedups.end());
  state.counters["speedup_max"] = *std::max_element(speedups.begin(), speedups.end());
  state.counters["speedup_spread_pct"] =
      100.0 * (*std::max_element(speedups.begin(), speedups.end()) - *std::min_element(speedups.begin(), speedups.end())) / mid;
  state.counters["ci_half_width_pct"] = 100.0 * median(half_widths);
  state.counters["reference_us"] = reference_us;
  state.counters["seconds_per_evaluation"] = seconds / static_cast<double>(speedups.size());
  state.SetLabel(fmt::format("{}, {} backend, turns {}", name, backend_name(backend), options.call_turns ? "on" : "off"));
}
BENCHMARK(BM_Repeatability)
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

// Comparing one output with the reference's (the check every trial and guard makes), for a
// float32 output of the fixture's full-scale size (4096 x 16384, 256 MiB), matching everywhere.
void BM_CompareOutputs(benchmark::State& state) {
  const at::Tensor reference = at::randn({4096, 16384});
  const at::Tensor candidate = reference + 1e-6 * at::randn({4096, 16384});
  const std::vector<worker::ProgramOutput> ref{{reference, "cpu"}}, cand{{candidate, "cpu"}};
  for (auto _ : state) {
    const worker::ComparisonResult r = worker::compare_outputs(ref, cand);
    if (!r.ok) state.SkipWithError("outputs should agree");
    benchmark::DoNotOptimize(r.max_abs_error);
  }
  state.SetBytesProcessed(state.iterations() * 2 * reference.nbytes());
}
BENCHMARK(BM_CompareOutputs)->Unit(benchmark::kMillisecond)->UseRealTime();

// One timed batch's reply through the channel and the typed protocol: a batch of 512 calls, each
// with one CPU output, described as the worker describes it, written by one thread, read and
// decoded strictly by another (what the evaluator pays per timed request besides the calls).
void BM_TimedReplyRoundTrip(benchmark::State& state) {
  const int calls = static_cast<int>(state.range(0));
  nlohmann::json described = {{"metas", nlohmann::json::array({{{"sizes", {4096, 16384}}, {"dtype", "float32"}, {"device", "cpu"}}})},
                              {"handles", nlohmann::json::array()},
                              {"calls", nlohmann::json::array()}};
  for (int c = 0; c < calls; ++c) described["calls"].push_back({uint64_t{1} << 40 | static_cast<uint64_t>(c) << 28});
  const worker::TimeReply reply{described, {}};
  int fds[2];
  if (pipe(fds) != 0) {
    state.SkipWithError("pipe failed");
    return;
  }
  size_t bytes = 0;
  for (auto _ : state) {
    const nlohmann::json wire = worker::encode_reply(reply);
    std::thread writer([&] { worker::write_message(fds[1], wire); });
    const nlohmann::json got = worker::read_message(fds[0], std::nullopt, "bench");
    writer.join();
    const auto decoded = worker::decode_reply<worker::TimeReply>(got, worker::Op::time);
    const auto refs = worker::batch_call_refs(decoded.batch, static_cast<size_t>(calls - 1), 2);
    benchmark::DoNotOptimize(refs.data());
    bytes = wire.dump().size();
  }
  close(fds[0]);
  close(fds[1]);
  state.counters["message_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_TimedReplyRoundTrip)->Arg(64)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace crl::eval
