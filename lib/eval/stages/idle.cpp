// The judge's idle probe, waited on.
#include "eval/stages/idle.h"

#include <fmt/format.h>

#include <chrono>

#include "core/clock.h"

namespace crl::eval {

IdleWait await_idle(Evaluation& e, double wait_seconds) {
  IdleWait w;
  const auto started = Clock::now();
  for (bool first = true;; first = false) {
    const auto asked = Clock::now();
    const auto probe = e.judge.ask(worker::ProbeRequest{e.options.idle_slack_us}, "probing the GPU");
    if (!probe) return w;
    w.asked = true;
    if (first) w.first = *probe;
    w.last = *probe;
    w.idle = probe->idle;
    if (w.idle || seconds_since(started) >= wait_seconds) {
      w.checked_s = seconds_since(started);
      w.waited_s = w.idle ? std::chrono::duration<double>(asked - started).count() : w.checked_s;
      return w;
    }
  }
}

std::string probe_readings(const worker::ProbeReply& probe) {
  return fmt::format("{:.0f} us (first {:.0f}, second {:.0f}{})", probe.probe_us, probe.first_probe_us, probe.second_probe_us,
                     probe.retries > 0 ? ", then a retry" : "");
}

std::string describe_wait(const IdleWait& w) {
  return fmt::format("idle probe {}{}, {:.0f} us when idle", probe_readings(w.first),
                     w.idle ? fmt::format("; idle {:.1f} ms later", 1e3 * w.waited_s)
                            : fmt::format("; still busy {:.1f} ms later ({})", 1e3 * w.waited_s, probe_readings(w.last)),
                     w.first.baseline_us);
}

}  // namespace crl::eval
