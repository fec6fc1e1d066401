// `crl tasks check`: compile every selected reference, run it in-process, prove it deterministic,
// apply the degenerate-output rule, and time it with the evaluator's own timer (the reference
// judged against itself), so that a published baseline is the time the reward divides by.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "suite/output_checks.h"
#include "suite/suite.h"

namespace crl::eval {

struct ReferenceCheckOptions {
  std::string scale = "small";
  Backend backend = Backend::cpu;
  uint64_t seed = 1;          // runs 1 and 2 use this seed; run 3 uses seed + other_seed_offset
  // Far from `seed` on purpose: make_arguments mixes seed and argument index symmetrically, so two
  // small seeds (both at most the number of arguments) can give the same tensors in swapped places,
  // and a symmetric operation (a loss of two inputs) would then look seed-independent.
  uint64_t other_seed_offset = 1000003;
  // Timing: the reference judged against itself by eval::Evaluator (its judge, its timing workers,
  // fresh inputs per call, caches flushed), for at most this many seconds per task; 0: not timed.
  double time_budget_seconds = 2;
  int cpu_threads = 0;        // intra-op threads of the evaluator's CPU workers; 0: LibTorch's default
  DegenerateRule rule;
  CompilerOptions compiler;   // cache folder, pool size, CUDA arch
};

// What happened to one task. status: "ok", "compile_error", "runtime_error", "nondeterministic"
// (two runs from one seed differ beyond the task's tolerance),
// "degenerate". A task whose notes say "degenerate: constant" (the chain is constant whatever its
// inputs, kept as KernelBench has it) is "ok" with its findings listed as declared.
struct ReferenceCheckResult {
  std::string id, category, status;
  std::string message;                  // the first problem, for the table; compile log on compile_error
  std::vector<OutputFinding> findings;  // degenerate-rule findings
  bool degenerate_declared = false;
  // False when two runs from one seed differed, though only within the task's tolerance (cuDNN's
  // atomic-add convolution algorithms on the GPU): the inputs are still fixed by the seed.
  bool bitwise_deterministic = true;
  double compile_seconds = 0;
  bool cache_hit = false;
  // From the evaluator's timing (0 when not timed): the reference's time per call, and the speedup
  // of the reference judged against itself with its 95% interval (1.00 when the timer is fair).
  double median_ms = 0, iqr_ms = 0;
  int timed_pairs = 0;
  double self_speedup = 0, self_speedup_ci_low = 0, self_speedup_ci_high = 0;
  double flops = 0, bytes = 0;          // per call, at the scale
  double gflops_per_s = 0, gbytes_per_s = 0;
  std::vector<std::vector<int64_t>> output_shapes;
  std::vector<std::string> output_dtypes;
  bool ok() const { return status == "ok"; }
};

struct ReferenceCheckReport {
  std::string scale, backend, device_name, torch_version;
  double seconds = 0;  // wall time of the whole check
  double time_budget_seconds = 0;  // the evaluator's timing budget per task (0: not timed)
  std::vector<ReferenceCheckResult> results;
  size_t failures() const;
};

// A report with no results yet, its scale, backend, LibTorch version and timing budget from `options`.
ReferenceCheckReport empty_report(const ReferenceCheckOptions& options);

// Checks `tasks` (compiling them all in parallel first, then running them one at a time).
// `progress` is called after each task with its result (for a running log); may be empty.
ReferenceCheckReport check_references(const std::vector<const Task*>& tasks, const ReferenceCheckOptions& options,
                                      const std::function<void(const ReferenceCheckResult&)>& progress = {});

// Checks one compiled reference (the library at `library_path`) for `task`; used by check_references.
ReferenceCheckResult check_compiled_reference(const Task& task, const std::string& library_path,
                                              const ReferenceCheckOptions& options);

nlohmann::json to_json(const ReferenceCheckResult& result);
nlohmann::json to_json(const ReferenceCheckReport& report);

}  // namespace crl::eval
