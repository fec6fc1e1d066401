// The turn page of a timed batch (call_turns.h).
#include "worker/call_turns.h"

#include <fmt/format.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

#include "core/error.h"

namespace crl::worker {
namespace {

uint32_t* futex_word(const std::atomic<uint32_t>& word) {
  // std::atomic<uint32_t> is lock-free and the size of its value (static_asserts in the header).
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint32_t>*>(&word));
}

// Blocks while word == seen, up to timeout_ms (a futex shared between processes); returns at once
// when it already differs. Spurious returns happen: callers re-read the word.
void wait_while_equal(const std::atomic<uint32_t>& word, uint32_t seen, int timeout_ms) {
  if (word.load(std::memory_order_acquire) != seen) return;
  timespec timeout{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000L};
  // Not FUTEX_PRIVATE: the page is shared between processes.
  (void)syscall(SYS_futex, futex_word(word), FUTEX_WAIT, seen, &timeout, nullptr, 0);
}

}  // namespace

void wake_all(std::atomic<uint32_t>& word) { (void)syscall(SYS_futex, futex_word(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0); }

bool await_above(const std::atomic<uint32_t>& word, uint32_t value, double timeout_seconds, const std::atomic<bool>* stop) {
  using Clock = std::chrono::steady_clock;
  const auto above = [&] { return word.load(std::memory_order_acquire) > value; };
  const auto stopped = [&] { return stop != nullptr && stop->load(std::memory_order_relaxed); };
  const auto started = Clock::now();
  // 1. The CPU's pause hint: the other side usually answers within this (an evaluator's reveal of
  //    one slot, a small task's call), and a spinner that yielded here gave its core to another
  //    process for a whole time slice on a loaded machine (CI's parallel tests).
  while (Clock::now() - started < std::chrono::microseconds(kPauseSpinMicroseconds)) {
    if (above()) return true;
    if (stopped()) return false;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  // 2. The scheduler's yield: a longer call (or a busy core) gets the core from the spinner at once.
  while (Clock::now() - started < std::chrono::microseconds(kYieldSpinMicroseconds)) {
    if (above()) return true;
    if (stopped()) return false;
    sched_yield();
  }
  // 3. Asleep on the futex (a long call: the wake-up is small beside it).
  const auto deadline = started + std::chrono::duration<double>(timeout_seconds);
  for (;;) {
    const uint32_t now = word.load(std::memory_order_acquire);
    if (now > value) return true;
    if (stopped() || Clock::now() > deadline) return false;
    wait_while_equal(word, now, 50);
  }
}

void TurnGate::wait_for_turn(uint32_t call) const {
  if (!await_above(page_->go, call, timeout_seconds_, nullptr)) {
    throw Error(fmt::format("call {} of a timed batch never got its turn within {:.0f} s", call, timeout_seconds_));
  }
}

void TurnGate::finish(uint32_t call, const std::vector<at::Tensor>& outputs) {
  const size_t n = std::min<size_t>(outputs.size(), kMaxTurnOutputs);
  for (size_t i = 0; i < n; ++i) {
    page_->outputs[i] = {reinterpret_cast<uint64_t>(outputs[i].data_ptr()), static_cast<uint64_t>(outputs[i].nbytes())};
  }
  page_->output_count.store(static_cast<uint32_t>(n), std::memory_order_relaxed);
  page_->done.store(call + 1, std::memory_order_release);
  wake_all(page_->done);
}

}  // namespace crl::worker
