// Verdict status names, the reward (CUDA-L1's rounding of what the interval guarantees), log truncation
// and JSON (de)serialisation.
#include "eval/verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace crl::eval {

std::string to_string(VerdictStatus status) {
  switch (status) {
    case VerdictStatus::kOk: return "ok";
    case VerdictStatus::kCompileError: return "compile_error";
    case VerdictStatus::kRuntimeError: return "runtime_error";
    case VerdictStatus::kTimeout: return "timeout";
    case VerdictStatus::kCrash: return "crash";
    case VerdictStatus::kMismatch: return "mismatch";
    case VerdictStatus::kHack: return "hack";
    case VerdictStatus::kFormatError: return "format_error";
    case VerdictStatus::kInternalError: return "internal_error";
  }
  return "unknown";
}

VerdictStatus parse_verdict_status(const std::string& text, std::string* hack_kind) {
  for (auto s : {VerdictStatus::kOk, VerdictStatus::kCompileError, VerdictStatus::kRuntimeError,
                 VerdictStatus::kTimeout, VerdictStatus::kCrash, VerdictStatus::kMismatch, VerdictStatus::kFormatError,
                 VerdictStatus::kInternalError}) {
    if (text == to_string(s)) return s;
  }
  if (text.rfind("hack:", 0) == 0 && text.size() > 5) {
    if (hack_kind != nullptr) *hack_kind = text.substr(5);
    return VerdictStatus::kHack;
  }
  throw InputError("verdict status '" + text +
                   "' is not one of ok, compile_error, runtime_error, timeout, crash, mismatch, format_error, "
                   "internal_error, hack:<kind>");
}

std::string Verdict::status_text() const {
  return status == VerdictStatus::kHack ? "hack:" + hack_kind : to_string(status);
}

double reward_from_speedup(double speedup) {
  if (!std::isfinite(speedup) || speedup <= 0) return 0;
  // The small epsilon keeps values that are exact in decimal (1.15) from dropping a cent
  // because their binary form lies just below (114.99999...).
  constexpr double kEpsilon = 1e-9;
  const double cents = speedup * 100.0;
  const double rounded = speedup >= 1.0 ? std::floor(cents + kEpsilon) : std::ceil(cents - kEpsilon);
  return rounded / 100.0;
}

double relative_half_width(double estimate, double low, double high) {
  if (!(estimate > 0) || !std::isfinite(estimate)) return INFINITY;
  return (high - low) / 2.0 / estimate;
}

namespace {

// The value the reward is taken from (see reward_from_interval); 0 when nothing was measured.
double reward_value(double speedup, double ci_low, double ci_high) {
  if (!std::isfinite(speedup) || speedup <= 0) return 0;
  if (!(ci_low <= ci_high)) return 0;  // NaN bounds, or bounds the wrong way round: no interval to trust
  if (ci_low <= 1.0 && ci_high >= 1.0) return 1.0;
  // The interval lies on one side of 1: its bound nearer 1, and never beyond the point estimate (a
  // percentile bootstrap's bound can pass the estimate when the samples are few and lopsided).
  return ci_low > 1.0 ? std::min(ci_low, speedup) : std::max(ci_high, speedup);
}

}  // namespace

double reward_from_interval(double speedup, double ci_low, double ci_high) {
  return reward_from_speedup(reward_value(speedup, ci_low, ci_high));
}

std::string reward_basis(double speedup, double ci_low, double ci_high) {
  const double value = reward_value(speedup, ci_low, ci_high);
  if (value <= 0) return "";
  if (ci_low <= 1.0 && ci_high >= 1.0) return "its interval includes 1";
  if (value != (ci_low > 1.0 ? ci_low : ci_high)) return "its point estimate (nearer 1 than its interval's bound)";
  return ci_low > 1.0 ? "its interval's lower bound" : "its interval's upper bound";
}

std::string reward_rule(double max_relative_ci, double noisy_budget_factor) {
  return fmt::format(
      "reward = 1.00 when the speedup's 95% interval includes 1, else the interval's bound nearer 1 (the lower bound above 1, "
      "the upper bound below 1; never beyond the speedup), truncated toward 1 at two decimals; 0 for every status but ok. A "
      "measurement whose interval is wider than +-{:g}% (relative half width; max_relative_ci {:g}) when its time budget is "
      "spent is measured on, up to {:g}x the budget, and still wider then (unless it lies wholly below the slow-stop speedup) "
      "it is internal_error, never rewarded; a re-measure as wide never counts as agreement",
      100 * max_relative_ci, max_relative_ci, noisy_budget_factor);
}

std::string truncate_log(const std::string& log, size_t max_bytes) {
  if (log.size() <= max_bytes) return log;
  const size_t head = max_bytes * 2 / 3;
  const size_t tail = max_bytes - head;
  return log.substr(0, head) + "\n[... " + std::to_string(log.size() - head - tail) +
         " bytes cut ...]\n" + log.substr(log.size() - tail);
}

namespace {

// A speedup may be infinite (a candidate timed at 0 us) or not a number; JSON has neither, so
// they travel as the strings "inf", "-inf" and "nan" (a null made the verdict unreadable).
nlohmann::json number_to_json(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

double number_from_json(const nlohmann::json& json, const std::string& what) {
  if (json.is_number()) return json.get<double>();
  if (json == "inf") return INFINITY;
  if (json == "-inf") return -INFINITY;
  if (json == "nan") return NAN;
  throw InputError(what + " must be a number (or \"inf\", \"-inf\", \"nan\")");
}

nlohmann::json time_to_json(const TimeSummary& t) {
  return {{"median_us", t.median_us}, {"iqr_us", t.iqr_us}, {"samples", t.samples}};
}

template <typename T>
T field(const nlohmann::json& json, const char* key, const std::string& where) {
  if (!json.is_object() || !json.contains(key)) {
    throw InputError(where + ": field '" + key + "' is missing");
  }
  try {
    return json.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(where + ": field '" + key + "' has the wrong type: " + e.what());
  }
}

TimeSummary time_from_json(const nlohmann::json& json, const std::string& where) {
  TimeSummary t;
  t.median_us = field<double>(json, "median_us", where);
  t.iqr_us = field<double>(json, "iqr_us", where);
  t.samples = field<int>(json, "samples", where);
  return t;
}

}  // namespace

const CheckStep* Verdict::first_failed_step() const {
  for (const auto& s : steps) {
    if (!s.passed) return &s;
  }
  return nullptr;
}

nlohmann::json to_json(const Verdict& v) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : v.steps) {
    steps.push_back({{"name", s.name}, {"passed", s.passed}, {"detail", s.detail}, {"seconds", s.seconds}});
  }
  return {{"task", v.task_id},
          {"candidate", v.candidate},
          {"backend", v.backend},
          {"scale", v.scale},
          {"baseline", v.baseline},
          {"format", v.format},
          {"params", v.params},
          {"status", v.status_text()},
          {"message", v.message},
          {"trials_run", v.trials_run},
          {"trials_passed", v.trials_passed},
          {"reference_time", time_to_json(v.reference_time)},
          {"candidate_time", time_to_json(v.candidate_time)},
          {"speedup", number_to_json(v.speedup)},
          {"speedup_ci", {number_to_json(v.speedup_ci_low), number_to_json(v.speedup_ci_high)}},
          {"speedup_ci_half_width", std::isfinite(v.speedup_ci_half_width()) ? v.speedup_ci_half_width() : 0.0},
          {"reward", v.reward},
          {"steps", steps},
          {"compile_log", v.compile_log},
          {"worker_log", v.worker_log},
          {"seconds", v.seconds},
          {"secret", v.secret}};
}

Verdict verdict_from_json(const nlohmann::json& json) {
  const std::string where = "verdict";
  Verdict v;
  v.task_id = field<std::string>(json, "task", where);
  v.candidate = field<std::string>(json, "candidate", where);
  v.backend = field<std::string>(json, "backend", where);
  v.scale = field<std::string>(json, "scale", where);
  v.baseline = json.value("baseline", std::string("eager"));  // files from before baselines: eager
  v.format = json.value("format", std::string("crl"));        // files from before KernelBench's format: crl
  v.params = json.value("params", std::string("crl"));        // and from before KernelBench's rule
  v.status = parse_verdict_status(field<std::string>(json, "status", where), &v.hack_kind);
  v.message = field<std::string>(json, "message", where);
  v.trials_run = field<int>(json, "trials_run", where);
  v.trials_passed = field<int>(json, "trials_passed", where);
  v.reference_time = time_from_json(field<nlohmann::json>(json, "reference_time", where), where + ".reference_time");
  v.candidate_time = time_from_json(field<nlohmann::json>(json, "candidate_time", where), where + ".candidate_time");
  v.speedup = number_from_json(field<nlohmann::json>(json, "speedup", where), where + ": field 'speedup'");
  const auto ci = field<nlohmann::json>(json, "speedup_ci", where);
  if (!ci.is_array() || ci.size() != 2) throw InputError(where + ": field 'speedup_ci' must hold two numbers");
  v.speedup_ci_low = number_from_json(ci[0], where + ": field 'speedup_ci'");
  v.speedup_ci_high = number_from_json(ci[1], where + ": field 'speedup_ci'");
  v.reward = field<double>(json, "reward", where);
  const auto steps = field<nlohmann::json>(json, "steps", where);
  if (!steps.is_array()) throw InputError(where + ": field 'steps' must be an array");
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string at = where + ".steps[" + std::to_string(i) + "]";
    CheckStep s;
    s.name = field<std::string>(steps[i], "name", at);
    s.passed = field<bool>(steps[i], "passed", at);
    s.detail = field<std::string>(steps[i], "detail", at);
    s.seconds = field<double>(steps[i], "seconds", at);
    v.steps.push_back(std::move(s));
  }
  v.compile_log = field<std::string>(json, "compile_log", where);
  v.worker_log = field<std::string>(json, "worker_log", where);
  v.seconds = field<double>(json, "seconds", where);
  v.secret = field<uint64_t>(json, "secret", where);
  return v;
}

}  // namespace crl::eval
