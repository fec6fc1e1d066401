// The verdict on one candidate program: status, times, speedup with its confidence interval,
// the named checks it went through, truncated logs, and the reward; JSON in both directions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace crl::eval {

// kFormatError: the completion held no program to evaluate (the job's parser says so; reward 0).
// kInternalError: crl itself failed (the reference did not run, a judge or channel of crl's own
// broke): not the candidate's fault, so the job leaves it out of the update instead of rewarding 0.
enum class VerdictStatus { kOk, kCompileError, kRuntimeError, kTimeout, kCrash, kMismatch, kHack, kFormatError,
                           kInternalError };

// "ok", "compile_error", ..., "hack" (the hack's kind is kept apart, in Verdict::hack_kind).
std::string to_string(VerdictStatus status);
// Parses a status word; "hack:<kind>" gives kHack and sets *hack_kind. Throws InputError otherwise.
VerdictStatus parse_verdict_status(const std::string& text, std::string* hack_kind = nullptr);

// One named check the evaluation went through (compile, trial 3, timing, a hack guard ...), with
// what it saw, so `crl eval --explain` can show how the verdict was reached.
struct CheckStep {
  std::string name;
  bool passed = false;
  std::string detail;
  double seconds = 0;
};

// Median and spread (interquartile range) of one program's timed calls, in microseconds.
struct TimeSummary {
  double median_us = 0;
  double iqr_us = 0;
  int samples = 0;
};

// Half an interval's width relative to its point estimate: 0.01 means +-1%; infinite for a
// non-positive estimate (nothing measured). The stop rule, the noise limit and the verdict's
// reported width all use this one definition.
double relative_half_width(double estimate, double low, double high);

struct Verdict {
  std::string task_id;
  std::string candidate;   // a name for the candidate: its file, or its JSONL line id
  std::string backend;     // "cpu" or "cuda"
  std::string scale;       // "small" or "full"
  std::string baseline = "eager";  // how the reference was timed: "eager" or "cuda_graph" (replayed)
  std::string format = "crl";      // the candidate's kind: "crl" (a .crl program) or "kernelbench" (a ModelNew module)
  std::string params = "crl";      // the parameters' rule: "crl" (fresh values per call) or "kernelbench" (Model's, one seed)
  VerdictStatus status = VerdictStatus::kRuntimeError;
  std::string hack_kind;   // set only when status is kHack
  std::string message;     // one line: what happened (the first failure, or the speedup)
  int trials_run = 0;
  int trials_passed = 0;
  TimeSummary reference_time;
  TimeSummary candidate_time;
  double speedup = 0;          // reference median / candidate median; 0 when not timed
  double speedup_ci_low = 0;   // 95% confidence interval of the speedup
  double speedup_ci_high = 0;
  double reward = 0;           // reward_from_interval: 1 when the interval includes 1, else its bound
                               // nearer 1, truncated toward 1; 0 on failure
  std::vector<CheckStep> steps;
  std::string compile_log;     // truncated
  std::string worker_log;      // the candidate worker's stdout and stderr, truncated
  double seconds = 0;          // wall-clock time the whole evaluation took
  uint64_t secret = 0;         // the evaluation's secret: `crl eval --seed <secret>` replays it (0: no judge)

  bool ok() const { return status == VerdictStatus::kOk; }
  // The first check that failed (the one the verdict's status comes from), or null.
  const CheckStep* first_failed_step() const;
  // "ok", "mismatch", "hack:<kind>", ...
  std::string status_text() const;
  // The interval's half width relative to the speedup (0.01: +-1%; relative_half_width), reported
  // beside every reward; derived, so never stored apart from the interval it comes from.
  double speedup_ci_half_width() const { return relative_half_width(speedup, speedup_ci_low, speedup_ci_high); }
};

// CUDA-L1's rounding: the speedup truncated toward 1 at two decimals (1.118 -> 1.11,
// 0.992 -> 1.00, 0.987 -> 0.99); a non-finite or non-positive speedup gives 0.
double reward_from_speedup(double speedup);

// The conservative reward of a measured speedup and its 95% interval: 1 when the interval includes
// 1 (the measurement cannot tell the program from the reference); otherwise the bound nearer 1 (the
// lower bound of a faster program, the upper bound of a slower one), never beyond the point
// estimate, truncated toward 1 by reward_from_speedup. So noise widens the interval and moves the
// reward toward 1: a lucky measurement earns no more than its interval guarantees. Nothing measured
// (a non-positive or non-finite speedup) gives 0.
double reward_from_interval(double speedup, double ci_low, double ci_high);
// Which value reward_from_interval took, for the verdict's message: "its interval includes 1",
// "its interval's lower bound", "its interval's upper bound", or "" when nothing was measured.
std::string reward_basis(double speedup, double ci_low, double ci_high);

// The rule above in one sentence, with the noise limit in force, for results files' /meta
// (`reward_rule`): whoever reads a file later knows what its rewards mean.
std::string reward_rule(double max_relative_ci, double noisy_budget_factor);

// Keeps the first and last parts of a long log, with a line saying how much was cut.
std::string truncate_log(const std::string& log, size_t max_bytes);

nlohmann::json to_json(const Verdict& verdict);
// Validates every field; a missing or ill-typed one throws InputError naming it.
Verdict verdict_from_json(const nlohmann::json& json);

}  // namespace crl::eval
