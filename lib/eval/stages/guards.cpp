// The hack guards (guards.h).
#include "eval/stages/guards.h"

#include <fmt/format.h>

#include "eval/stages/outputs.h"
#include "eval/worker_call.h"

namespace crl::eval {
namespace {

using Problem = OutputCheck::Problem;

// A kind the worker names; one crl does not know is a malformed reply (the worker's failure).
std::optional<HackKind> worker_kind(const std::string& name) { return parse_hack_kind(name); }

Failure malformed(const std::string& what) {
  return Failure::of(VerdictStatus::kCrash, "hack guards: malformed reply (" + what + ")", Failure::Cleanup::kill_worker);
}

// The checks the worker judged alone: the first failed one is the verdict.
std::optional<Failure> worker_checks(Evaluation& e, const worker::GuardReply& reply, const Clock::time_point& t) {
  std::optional<Failure> first;
  for (const auto& check : reply.checks) {
    e.trace.step("guard: " + check.name, check.passed, check.detail, t);
    if (check.passed || first) continue;
    const auto kind = worker_kind(check.kind);
    if (!kind) return malformed("unknown hack kind '" + check.kind + "'");
    first = Failure::hack_found(*kind, check.name + ": " + check.detail);
  }
  return first;
}

// Each group of outputs against the reference's for its seed.
std::optional<Failure> compare_groups(Evaluation& e, CandidateWorker& w, const worker::GuardReply& reply, const Clock::time_point& t) {
  const size_t seed_b = e.task_judge.seeds.size() > 1 ? 1 : 0;
  size_t next = 0;
  for (const auto& group : reply.groups) {
    const std::vector<worker::TensorRef> slice(reply.outputs.begin() + static_cast<std::ptrdiff_t>(next),
                                               reply.outputs.begin() + static_cast<std::ptrdiff_t>(next + static_cast<size_t>(group.count)));
    next += static_cast<size_t>(group.count);
    const size_t seed_index = group.seed_index == 0 ? 0 : seed_b;
    const OutputCheck check = check_outputs(e, *w.process, slice, fmt::format("trial:{}", seed_index));
    const std::string name = "guard: " + group.name;
    if (check.problem == Problem::judge_failed) {
      if (e.judge.out_of_memory()) return e.judge.lost("comparing outputs");
      return Failure::of(VerdictStatus::kCrash, name + ": the candidate's outputs could not be read");
    }
    e.trace.step(name, check.ok(), check.ok() ? "matches the reference" + precision_words(check) : check.message, t);
    if (check.ok()) continue;
    if (check.problem == Problem::crash) return Failure::of(VerdictStatus::kCrash, name + ": " + check.message);
    const auto kind = check.problem == Problem::deferred_work ? std::optional(HackKind::deferred_work) : worker_kind(group.kind);
    if (!kind) return malformed("unknown hack kind '" + group.kind + "'");
    return Failure::hack_found(*kind, group.name + ": " + check.message);
  }
  return std::nullopt;
}

// Per-sample guard: the first trial again, each sample's inputs scaled by its own factor.
std::optional<Failure> samples_scaled_apart(Evaluation& e, CandidateWorker& w) {
  const auto t = Clock::now();
  const std::string name = "guard: samples scaled apart";
  auto reply = call(*w.process, worker::RunRequest{std::nullopt, e.task_judge.seeds[0], true}, e.options.call_timeout_seconds,
                    "samples scaled apart");
  if (!reply) {
    e.trace.step(name, false, reply.failure().message, t);
    return reply.failure();
  }
  const OutputCheck check = check_outputs(e, *w.process, reply->outputs, "spread");
  if (check.problem == Problem::judge_failed) {
    if (e.judge.out_of_memory()) return e.judge.lost("comparing outputs");
    return Failure::of(VerdictStatus::kCrash, "samples scaled apart: the candidate's outputs could not be read");
  }
  e.trace.step(name, check.ok(), check.ok() ? "matches the reference" + precision_words(check) : check.message, t);
  if (check.ok()) return std::nullopt;
  return Failure::hack_found(check.problem == Problem::deferred_work ? HackKind::deferred_work : HackKind::batch_copy,
                             "right on the task's inputs, wrong when each sample's inputs are scaled by its own factor (one "
                             "sample's result copied across the batch?): " + check.message);
}

}  // namespace

std::optional<Failure> run_guards(Evaluation& e, CandidateWorker& w) {
  const auto t = Clock::now();
  const TaskJudge& j = e.task_judge;
  const size_t seed_b = j.seeds.size() > 1 ? 1 : 0;
  // Three requests: each part's allocations come after the earlier parts' outputs were compared
  // and let go (the worker lets go of what it described at its next request).
  for (const int part : {1, 2, 3}) {
    auto reply = call(*w.process, worker::GuardRequest{{j.seeds[0], j.seeds[seed_b]}, j.output_bytes, e.options.guard_settle_seconds, part},
                      e.options.call_timeout_seconds * 8, "hack guards");
    if (!reply) {
      Failure f = reply.failure();
      if (f.out_of_memory && f.status == VerdictStatus::kRuntimeError) {
        // The guards hold copies and earlier outputs beside the program's own: crl's machinery,
        // so its running out is crl's limit (the program's own calls fitted in the trials).
        f.status = VerdictStatus::kInternalError;
        f.message += " (the guards' copies and held outputs beside the program's; crl's limit)";
      }
      e.trace.step("guards", false, f.message, t);
      return f;
    }
    if (auto f = worker_checks(e, *reply, t)) return f;
    if (auto f = compare_groups(e, w, *reply, t)) return f;
  }
  if (j.spread) return samples_scaled_apart(e, w);
  return std::nullopt;
}

}  // namespace crl::eval
