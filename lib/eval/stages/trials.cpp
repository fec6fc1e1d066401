// The correctness trials (trials.h).
#include "eval/stages/trials.h"

#include <fmt/format.h>

#include "eval/worker_call.h"

namespace crl::eval {
namespace {

using Problem = OutputCheck::Problem;

struct Trial {
  std::string name;  // "trial 2", "edge trial 1"
  std::string key;   // the judge's key of the reference outputs: trial:<i>, edge:<i>
  uint64_t seed = 0;
  bool edges = false;
};

std::vector<Trial> trials_of(const TaskJudge& j) {
  std::vector<Trial> trials;
  for (size_t i = 0; i < j.seeds.size(); ++i) trials.push_back({fmt::format("trial {}", i + 1), fmt::format("trial:{}", i), j.seeds[i], false});
  for (size_t k = 0; k < j.edge_seeds.size(); ++k) {
    trials.push_back({fmt::format("edge trial {}", k + 1), fmt::format("edge:{}", k), j.edge_seeds[k], true});
  }
  return trials;
}

// A trial's outputs that failed their check, as the verdict says it.
Failure trial_failure(Evaluation& e, const Trial& trial, const OutputCheck& check, const Clock::time_point& t) {
  if (check.problem == Problem::judge_failed) {
    if (e.judge.out_of_memory()) return e.judge.lost("comparing outputs");
    e.trace.step(trial.name, false, "the judge could not compare the outputs", t);
    return Failure::of(VerdictStatus::kCrash, "the candidate's outputs could not be read (bad output handle?)");
  }
  e.trace.step(trial.name, false, check.message, t);
  if (check.problem == Problem::deferred_work) return Failure::hack_found(HackKind::deferred_work, trial.name + ": " + check.message);
  if (check.problem == Problem::crash) return Failure::of(VerdictStatus::kCrash, trial.name + ": " + check.message);
  return Failure::of(VerdictStatus::kMismatch, fmt::format("{} (seed {}): {}", trial.name, trial.seed, check.message));
}

std::optional<Failure> run_trial(Evaluation& e, CandidateWorker& w, const Trial& trial) {
  const auto t = Clock::now();
  if (!e.judge.ask(worker::FillRequest{{{0, trial.seed, trial.edges, false}}, false}, "filling inputs")) {
    return e.judge.lost("filling inputs");
  }
  auto reply = call(*w.process, worker::RunRequest{0, 0, false}, e.options.call_timeout_seconds,
                    fmt::format("{} (seed {})", trial.name, trial.seed));
  e.trace.verdict().trials_run++;
  if (!reply) {
    e.trace.step(trial.name, false, reply.failure().message, t);
    return reply.failure();
  }
  const OutputCheck check = check_outputs(e, *w.process, reply->outputs, trial.key);
  if (!check.ok()) return trial_failure(e, trial, check, t);
  const auto changed = inputs_changed(e, 0, trial.seed, trial.edges, false);
  if (!changed) return e.judge.lost("checking inputs");
  e.trace.step(trial.name, changed->empty(), changed->empty() ? "matches the reference" + precision_words(check) + "; inputs unchanged" : *changed,
               t);
  if (!changed->empty()) return Failure::hack_found(HackKind::input_mutation, trial.name + ": " + *changed);
  e.trace.verdict().trials_passed = e.trace.verdict().trials_run;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> inputs_changed(Evaluation& e, int slot, uint64_t seed, bool edges, bool keep) {
  const auto r = e.judge.ask(worker::CheckInputsRequest{slot, seed, edges, false, keep}, "checking inputs");
  if (!r) return std::nullopt;
  if (r->changed.empty()) return std::string();
  return fmt::format("arguments modified in place: {}", nlohmann::json(r->changed).dump());
}

std::optional<Failure> run_trials(Evaluation& e, CandidateWorker& w) {
  for (const Trial& trial : trials_of(e.task_judge)) {
    if (auto f = run_trial(e, w, trial)) return f;
  }
  return std::nullopt;
}

}  // namespace crl::eval
