// How many input slots (calls) a timed batch has: a pure rule, tested on its own.
#pragma once

#include <cstdint>

namespace crl::eval {

struct BatchPlanLimits {
  double min_batch_us = 0;          // the reference's calls of a batch should last this long ...
  int max_batch_calls = 512;        // ... within this many calls
  int max_slots = 64;               // distinct inputs to exceed the caches, at most
  uint64_t arena_bytes = 0;         // the arena holds every slot's inputs
  uint64_t batch_output_bytes = 0;  // every call's outputs of a batch are held until it is checked
};

// Slots per timed batch: enough distinct inputs to exceed the caches (256 MiB of inputs) and
// enough calls to last min_batch_us (by the reference's time per call, 0 when not timed), within
// the arena's and the held outputs' budgets; at least 1.
int plan_timed_batch(uint64_t slot_bytes, uint64_t output_bytes, double reference_call_us, const BatchPlanLimits& limits);

}  // namespace crl::eval
