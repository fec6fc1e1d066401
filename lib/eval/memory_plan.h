// How the judge, the reference's timing worker and the candidate share one GPU: a pure rule, sized
// per task from the card and the reference's measured call, tested on its own.
#pragma once

#include <cstdint>
#include <string>

namespace crl::eval {

// What one task needs, in bytes, as the judge measured it (CallTimeReply) and the arena's layout.
struct TaskMemory {
  uint64_t card = 0;          // the GPU's memory
  uint64_t arguments = 0;     // one call's arguments (inputs and params)
  uint64_t outputs = 0;       // one call's outputs
  uint64_t call_peak = 0;     // what one reference call allocates beyond its arguments, at its peak
  uint64_t arena = 0;         // a program worker's input arena (every slot of a timed batch)
  int slots = 1;              // calls per timed batch, each one's outputs held until it is checked
};

// Shares given by the user (EvalOptions' fractions of the card; 0: planned).
struct FixedShares {
  double judge = 0, reference = 0, candidate = 0;
};

// The shares every task had before they were planned, kept wherever each process's need fits in
// them (timings measured under them stay comparable); the reference's worker also loads with its
// usual share, before the plan exists.
inline constexpr FixedShares kUsualShares{0.25, 0.25, 0.45};

struct MemoryPlan {
  uint64_t card = 0;  // the GPU's memory; 0: not planned (the CPU backend)
  // Fractions of the card (caching allocator plus arena), as each process is capped.
  double judge = 0, reference = 0, candidate = 0;
  uint64_t judge_cache = 0;  // reference outputs the judge keeps
  // The card does not hold the three processes' peaks at once: the judge and the candidate's worker
  // hand their allocators' free blocks back after each request, so that their peaks take turns (the
  // shares then add up to more than the budget; the timed phase, with both workers' batches held
  // while the judge fills and checks, still fits).
  bool take_turns = false;
  // Estimates, for messages: a program like the reference in a worker (its timed batch), and the
  // same with the hack guards' extra input and outputs.
  uint64_t reference_worker_need = 0, judge_need = 0, candidate_guard_need = 0;
  std::string describe() const;
  // For a candidate that ran out of its share: how large it was and what the reference needs.
  std::string candidate_share_said() const;
};

// The usual shares (judge 0.25, reference 0.25, candidate 0.45 of the card) where each process's need
// fits in them; otherwise sized by the needs. Throws Error (crl's limit, named with the figures)
// when even the timed phase does not fit.
// `budget` is the fraction of the card the three may use together (the rest: their CUDA contexts).
MemoryPlan plan_memory(const TaskMemory& task, double budget, uint64_t judge_cache_limit, const FixedShares& fixed = {});

}  // namespace crl::eval
