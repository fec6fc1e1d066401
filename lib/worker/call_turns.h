// Calls that cannot see each other (CPU backend): the turn page through which a timed batch's slots
// are revealed one call at a time. The evaluator copies call i's inputs into the arena only once
// call i-1 has returned (and after it has read a secret sample of that call's outputs), so no call
// can read a later call's inputs, and a call that returns before its outputs are computed is seen.
// The page lies in the program worker's arena memfd, after its slots; both sides wait on it with
// futexes after a short spin (await_above).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <ATen/Tensor.h>

#include "worker/exchange.h"

namespace crl::worker {

constexpr int kMaxTurnOutputs = 64;  // outputs of one call the page can describe (of kTurnPageBytes: exchange.h)
// How long a worker waits for a turn before it gives up (the evaluator, which serves the turns, ends
// a batch that outlasts its own limit first, by killing the worker).
constexpr double kTurnTimeoutSeconds = 600;
// How each side waits (await_above): the worker for its turn, the evaluator for a call's return.
constexpr int kPauseSpinMicroseconds = 50;    // spinning on the CPU's pause hint, then
constexpr int kYieldSpinMicroseconds = 2000;  // spinning on sched_yield, then asleep on the futex

// What crosses between the worker and the evaluator, in shared memory.
struct TurnPage {
  std::atomic<uint32_t> go;    // call i of the batch may start once go > i (the evaluator raises it)
  std::atomic<uint32_t> done;  // calls of the batch that returned (the worker raises it)
  std::atomic<uint32_t> output_count;
  uint32_t unused = 0;
  struct Span {
    uint64_t address = 0;  // in the worker's memory: the evaluator reads it with process_vm_readv
    uint64_t bytes = 0;
  };
  Span outputs[kMaxTurnOutputs];  // the last returned call's outputs, contiguous
};
static_assert(sizeof(TurnPage) <= kTurnPageBytes);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// Waits until word > value: spinning, then yielding, then asleep (the phases above). False when
// timeout_seconds passed or *stop (if given) became true first.
bool await_above(const std::atomic<uint32_t>& word, uint32_t value, double timeout_seconds, const std::atomic<bool>* stop);
// Wakes every process waiting on `word`.
void wake_all(std::atomic<uint32_t>& word);

// The worker's side, inside a timed batch: waits for call i's turn, then publishes what call i
// returned. Throws Error when the turn does not come within timeout_seconds (the evaluator gone).
class TurnGate {
 public:
  TurnGate(TurnPage* page, double timeout_seconds) : page_(page), timeout_seconds_(timeout_seconds) {}
  void wait_for_turn(uint32_t call) const;
  // outputs: made contiguous by the caller (what the batch's description will name).
  void finish(uint32_t call, const std::vector<at::Tensor>& outputs);

 private:
  TurnPage* page_;
  double timeout_seconds_;
};

}  // namespace crl::worker
