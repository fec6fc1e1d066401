// The GPU memory plan of one task (memory_plan.h).
#include "eval/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace crl::eval {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Room beyond an estimate: the caching allocator rounds blocks up and keeps some split, and a
// process allocates a few small tensors of its own (the judge's flush buffer, events, scalars).
constexpr double kRounding = 1.02;
constexpr uint64_t kSmallAllocations = uint64_t{256} << 20;
// What the judge holds between requests when it hands its free blocks back (taking turns).
constexpr uint64_t kJudgeFloor = uint64_t{512} << 20;

uint64_t padded(uint64_t bytes) { return static_cast<uint64_t>(static_cast<double>(bytes) * kRounding) + kSmallAllocations; }
double gib(uint64_t bytes) { return static_cast<double>(bytes) / kGiB; }

}  // namespace

MemoryPlan plan_memory(const TaskMemory& task, double budget, uint64_t judge_cache_limit, const FixedShares& fixed) {
  if (task.card == 0) throw Error("the memory plan needs the GPU's size");
  const double card = static_cast<double>(task.card);
  const auto bytes_of = [&](double fraction) { return static_cast<uint64_t>(fraction * card); };
  const auto fraction_of = [&](uint64_t bytes) { return std::min(static_cast<double>(bytes) / card, 1.0); };
  const uint64_t usable = bytes_of(budget);
  // One call's temporaries beyond its own outputs (the call's peak counts its outputs too).
  const uint64_t temporaries = task.call_peak > task.outputs ? task.call_peak - task.outputs : 0;
  const uint64_t held_outputs = static_cast<uint64_t>(std::max(task.slots, 1)) * task.outputs;

  MemoryPlan plan;
  plan.card = task.card;
  // A program worker timing a batch: its arena, every call's outputs held, one call's temporaries.
  plan.reference_worker_need = padded(task.arena + held_outputs + temporaries);
  // The judge's requests: a call's arguments made afresh and the reference run on them (its float64
  // run is cut into chunks until it fits; its cached outputs are let go when a request needs room).
  plan.judge_need = padded(task.arguments + task.call_peak);
  // The candidate's hack guards (guard_probe.h): beside the arena, an input and three outputs.
  plan.candidate_guard_need = padded(task.arena + task.arguments + 3 * task.outputs + temporaries);
  const uint64_t candidate_need = std::max(plan.reference_worker_need, plan.candidate_guard_need);

  const bool none_fixed = fixed.judge == 0 && fixed.reference == 0 && fixed.candidate == 0;
  const bool usual_fit = bytes_of(kUsualShares.judge) >= plan.judge_need && bytes_of(kUsualShares.reference) >= plan.reference_worker_need &&
                         bytes_of(kUsualShares.candidate) >= candidate_need && kUsualShares.judge + kUsualShares.reference + kUsualShares.candidate <= budget;
  if ((fixed.judge > 0 && fixed.reference > 0 && fixed.candidate > 0) || (none_fixed && usual_fit)) {
    const FixedShares& shares = none_fixed ? kUsualShares : fixed;
    plan.judge = shares.judge;
    plan.reference = shares.reference;
    plan.candidate = shares.candidate;
    plan.judge_cache = judge_cache_limit;
    return plan;
  }
  const uint64_t reference = fixed.reference > 0 ? bytes_of(fixed.reference) : plan.reference_worker_need;
  const uint64_t judge_least = fixed.judge > 0 ? bytes_of(fixed.judge) : plan.judge_need;
  const uint64_t candidate_least = fixed.candidate > 0 ? bytes_of(fixed.candidate) : candidate_need;
  uint64_t judge = 0, candidate = 0;
  if (judge_least + reference + candidate_least <= usable) {
    // All three peaks at once: the judge keeps outputs in half of what is spare, the candidate
    // gets the rest (a program may need more room than the reference).
    const uint64_t spare = usable - judge_least - reference - candidate_least;
    plan.judge_cache = fixed.judge > 0 ? judge_cache_limit : std::min(judge_cache_limit, fixed.candidate > 0 ? spare : spare / 2);
    judge = fixed.judge > 0 ? judge_least : judge_least + plan.judge_cache;
    candidate = fixed.candidate > 0 ? candidate_least : usable - judge - reference;
  } else if (judge_least + reference + plan.reference_worker_need <= usable && fixed.candidate == 0 && fixed.judge == 0) {
    // The timed phase fits (both workers' batches held while the judge fills and checks); the
    // candidate's guards and the judge's reference runs take turns with each other.
    plan.take_turns = true;
    judge = usable - reference - plan.reference_worker_need;
    candidate = usable - reference - kJudgeFloor;
  } else {
    throw Error(fmt::format(
        "this task does not fit this GPU at this scale (crl's limit, not a program's): {:.2f} GiB usable ({:.0f}% of {:.2f}), "
        "while the judge needs {:.2f} GiB, the reference's timing worker {:.2f} and a program like the reference {:.2f} at "
        "once (one call: {:.2f} GiB of arguments, {:.2f} GiB beyond them at its peak, {} calls per timed batch); a smaller "
        "scale or a larger card",
        gib(usable), 100 * budget, gib(task.card), gib(judge_least), gib(reference), gib(plan.reference_worker_need),
        gib(task.arguments), gib(task.call_peak), task.slots));
  }
  plan.judge = fraction_of(judge);
  plan.reference = fraction_of(reference);
  plan.candidate = fraction_of(candidate);
  return plan;
}

std::string MemoryPlan::candidate_share_said() const {
  const double c = gib(card);
  return fmt::format("its share of this GPU for this task: {:.1f} GiB of {:.1f} (a program like the reference needs {:.1f}, "
                     "{:.1f} with crl's guards)",
                     candidate * c, c, gib(reference_worker_need), gib(candidate_guard_need));
}

std::string MemoryPlan::describe() const {
  const double c = gib(card);
  return fmt::format("GPU memory of {:.1f} GiB: the judge {:.1f} GiB (reference outputs kept: {:.1f}), the reference's worker "
                     "{:.1f}, the candidate's {:.1f} (a program like the reference needs {:.1f}, with the guards {:.1f}){}",
                     c, judge * c, gib(judge_cache), reference * c, candidate * c, gib(reference_worker_need),
                     gib(candidate_guard_need),
                     take_turns ? "; the card does not hold all three peaks at once: the judge's and the candidate's take turns" : "");
}

}  // namespace crl::eval
