// The stricter checks (strict_checks.h).
#include "eval/stages/strict_checks.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "eval/stages/outputs.h"
#include "eval/stages/timing.h"
#include "eval/worker_call.h"

namespace crl::eval {
namespace {

using Problem = OutputCheck::Problem;

constexpr const char* kStep = "guard: stricter checks";
// The judge's key for the reference outputs of the stricter trial in hand (one at a time, so the
// judge's cache holds one more set, not strict_trials more).
constexpr const char* kKey = "strict";

std::string kind_text(const StrictTrialKind& k) {
  if (k.edges && k.spread) return "edge values, samples scaled apart";
  if (k.edges) return "edge values";
  if (k.spread) return "samples scaled apart";
  return "ordinary inputs";
}

// A check's failure as the verdict says it: wrong outputs are the skipped work the gate suspected.
Failure strict_failure(Evaluation& e, const std::string& where, const OutputCheck& check) {
  if (check.problem == Problem::judge_failed) {
    if (e.judge.out_of_memory()) return e.judge.lost("comparing outputs");
    return Failure::of(VerdictStatus::kCrash, where + ": the candidate's outputs could not be read");
  }
  if (check.problem == Problem::crash) return Failure::of(VerdictStatus::kCrash, where + ": " + check.message);
  if (check.problem == Problem::deferred_work) return Failure::hack_found(HackKind::deferred_work, where + ": " + check.message);
  return Failure::hack_found(HackKind::beyond_roofline,
                             "faster than its task's estimate allows, and wrong on a stricter check (work skipped?): " + where + ": " +
                                 check.message);
}

std::optional<Failure> strict_trial(Evaluation& e, CandidateWorker& w, int index, uint64_t seed, const StrictTrialKind& kind) {
  const std::string where = fmt::format("stricter trial {} (seed {}, {})", index + 1, seed, kind_text(kind));
  if (!e.judge.ask(worker::FillRequest{{{0, seed, kind.edges, kind.spread}}, false}, "filling inputs")) {
    return e.judge.lost("filling inputs");
  }
  auto reply = call(*w.process, worker::RunRequest{0, 0, false}, e.options.call_timeout_seconds, where);
  if (!reply) return reply.failure();
  if (!e.judge.ask(worker::ReferenceRequest{kKey, seed, kind.edges, kind.spread, true}, "the reference on a stricter trial")) {
    return e.judge.lost("the reference on a stricter trial");
  }
  const OutputCheck check = check_outputs(e, *w.process, reply->outputs, kKey);
  if (!check.ok()) return strict_failure(e, where, check);
  const auto inputs = e.judge.ask(worker::CheckInputsRequest{0, seed, kind.edges, kind.spread, false}, "checking inputs");
  if (!inputs) return e.judge.lost("checking inputs");
  if (!inputs->changed.empty()) {
    return Failure::hack_found(HackKind::input_mutation,
                               fmt::format("{}: arguments modified in place: {}", where, nlohmann::json(inputs->changed).dump()));
  }
  return std::nullopt;
}

// One batch as the timing runs it (every slot fresh secret inputs, one request), untimed, and every
// call checked: a program that skips a few calls of a batch passes the timing's one checked slot
// per pair with a chance of the calls it computes, never this.
std::optional<Failure> audited_batch(Evaluation& e, CandidateWorker& w) {
  const int slots = e.task_judge.layout.slots;
  worker::FillRequest fill{{}, false};
  std::vector<int64_t> slot_list;
  for (int s = 0; s < slots; ++s) {
    fill.slots.push_back({s, e.task_judge.draws.next(), false, false});
    slot_list.push_back(s);
  }
  w.process->freeze();
  if (!e.judge.ask(fill, "filling the audited batch's inputs")) return e.judge.lost("filling the audited batch's inputs");
  auto reply = call(*w.process, worker::TimeRequest{slot_list}, e.options.call_timeout_seconds * slots + 10, "the audited batch");
  if (!reply) return reply.failure();
  w.process->freeze();
  for (int s = 0; s < slots; ++s) {
    const std::string where = fmt::format("audited batch slot {}", s);
    auto f = check_timed_call(e, *w.process, *reply, slots, s, fill.slots[static_cast<size_t>(s)].seed, where);
    if (!f) continue;
    if (f->status == VerdictStatus::kInternalError) return e.judge.lost(f->message);
    if (f->status == VerdictStatus::kHack && f->hack == HackKind::timed_output_mismatch) {
      return Failure::hack_found(HackKind::beyond_roofline,
                                 "faster than its task's estimate allows, and wrong in a call of a batch (work skipped?): " + f->message);
    }
    return f;
  }
  auto released = call(*w.process, worker::ReleaseRequest{}, e.options.call_timeout_seconds, "releasing the audited batch's outputs");
  w.process->freeze();
  if (!released) return released.failure();
  return std::nullopt;
}

}  // namespace

StrictTrialKind strict_trial_kind(int index, bool task_has_edges, bool task_spreads) {
  return {task_has_edges && index % 2 == 1, task_spreads && index % 3 == 2};
}

std::optional<Failure> run_strict_checks(Evaluation& e, CandidateWorker& w) {
  const auto t = Clock::now();
  const bool edges = e.task.spec.has_edges(), spread = e.task_judge.spread;
  int with_edges = 0, spread_apart = 0;
  for (int i = 0; i < e.options.strict_trials; ++i) {
    const StrictTrialKind kind = strict_trial_kind(i, edges, spread);
    // Drawn from the secret's sequence after the timing's: fresh for every candidate, replayed by --seed.
    if (auto f = strict_trial(e, w, i, e.task_judge.draws.next(), kind)) {
      e.trace.step(kStep, false, f->message, t);
      return f;
    }
    with_edges += kind.edges;
    spread_apart += kind.spread;
  }
  if (auto f = audited_batch(e, w)) {
    e.trace.step(kStep, false, f->message, t);
    return f;
  }
  e.trace.step(kStep, true,
               fmt::format("{} more trials on fresh inputs ({} with edge values, {} with samples scaled apart) matched the reference, "
                           "and every call of a batch of {} (not one) matched with its inputs unchanged",
                           e.options.strict_trials, with_edges, spread_apart, e.task_judge.layout.slots),
               t);
  return std::nullopt;
}

}  // namespace crl::eval
