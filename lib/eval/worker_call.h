// One typed request to a worker process (protocol.h) and its reply, or what went wrong in verdict
// terms: the one place where a worker's failure becomes a status (timeout, crash, runtime_error).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "eval/failure.h"
#include "eval/worker_process.h"
#include "worker/protocol.h"

namespace crl::eval {

// Sends an encoded request and waits up to `timeout_seconds`; the raw reply on success. `seconds`
// gets the time from sending the request to the whole reply, by this process's clock: the one timer
// of every timed call, the reference's and the candidate's alike. A failure's message starts with
// `during`; its cleanup is kill_worker (a worker whose request failed is not asked again).
Result<nlohmann::json> call_raw(WorkerProcess& worker, worker::Op op, const nlohmann::json& request, double timeout_seconds,
                                const std::string& during, double* seconds = nullptr);

template <typename Request>
Result<typename Request::Reply> call(WorkerProcess& worker, const Request& request, double timeout_seconds,
                                     const std::string& during, double* seconds = nullptr) {
  auto raw = call_raw(worker, Request::op, worker::encode_request(request), timeout_seconds, during, seconds);
  if (!raw) return raw.failure();
  try {
    return worker::decode_reply<typename Request::Reply>(*raw, Request::op);
  } catch (const InputError& e) {
    worker.kill();
    return Failure::of(VerdictStatus::kCrash, during + ": the worker sent a malformed reply (" + e.what() + ")",
                       Failure::Cleanup::kill_worker);
  }
}

}  // namespace crl::eval
