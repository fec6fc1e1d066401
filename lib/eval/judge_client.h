// The evaluator's typed requests to a task's judge during one evaluation. The judge is crl's own
// process: a request it fails is crl's failure, recorded as a failed step, and lost() turns it into
// the verdict's internal_error (the judge is dropped; the next evaluation starts a fresh one).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/clock.h"
#include "eval/failure.h"
#include "eval/trace.h"
#include "eval/worker_call.h"

namespace crl::eval {

class JudgeClient {
 public:
  // `timeout_seconds` bounds each request; failed requests are recorded in `trace`.
  JudgeClient(WorkerProcess& judge, double timeout_seconds, size_t max_log_bytes, Trace& trace)
      : judge_(judge), timeout_seconds_(timeout_seconds), max_log_bytes_(max_log_bytes), trace_(trace) {}

  // The reply, or nothing when the judge failed (then last_error() says how).
  template <typename Request>
  std::optional<typename Request::Reply> ask(const Request& request, const std::string& during) {
    const auto asked = Clock::now();
    auto reply = call(judge_, request, timeout_seconds_, "the judge, " + during);
    seconds_by_op_[std::string(worker::op_name(Request::op))] += seconds_since(asked);
    if (!reply) {
      trace_.step("judge: " + during, false, reply.failure().message, Clock::now());
      const std::string& message = reply.failure().message;
      last_error_ = message.substr(0, message.find('\n'));  // c10's errors go on with a stack trace
      out_of_memory_ = reply.failure().out_of_memory;
      return std::nullopt;
    }
    return std::move(*reply);
  }

  // The judge's last failed request ran out of its GPU memory (after letting its cache go): a
  // comparison it could not make is then crl's failure, not a bad output handle of the candidate's.
  bool out_of_memory() const { return out_of_memory_; }
  // The internal_error of a judge that failed `during` something: its last error and its log.
  Failure lost(const std::string& during) const;
  // Seconds spent in requests so far, by operation name (the timing step says where a pair's
  // untimed work goes).
  const std::map<std::string, double>& seconds_by_op() const { return seconds_by_op_; }
  WorkerProcess& process() { return judge_; }

 private:
  WorkerProcess& judge_;
  double timeout_seconds_;
  size_t max_log_bytes_;
  Trace& trace_;
  std::string last_error_;
  bool out_of_memory_ = false;
  std::map<std::string, double> seconds_by_op_;
};

}  // namespace crl::eval
