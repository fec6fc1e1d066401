// A worker's reply or its failure, in verdict terms.
#include "eval/worker_call.h"

#include <fmt/format.h>

#include <chrono>

#include "core/clock.h"
#include "core/error.h"

namespace crl::eval {

Result<nlohmann::json> call_raw(WorkerProcess& worker, worker::Op op, const nlohmann::json& request, double timeout_seconds,
                                const std::string& during, double* seconds) {
  constexpr auto kill = Failure::Cleanup::kill_worker;
  try {
    const auto start = std::chrono::steady_clock::now();
    nlohmann::json reply = worker.request(request, std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000.0)));
    if (seconds != nullptr) *seconds = seconds_since(start);
    const auto error = worker::reply_error(reply, op);
    if (!error) return reply;
    const VerdictStatus status = error->status == "format_error"    ? VerdictStatus::kFormatError
                                 : error->status == "compile_error" ? VerdictStatus::kCompileError
                                                                    : VerdictStatus::kRuntimeError;
    Failure f = Failure::of(status, fmt::format("{}: {}", during, error->error), kill);
    f.out_of_memory = error->out_of_memory;
    if (error->device_short) {
      // The GPU ran out while this worker was within its share: the evaluation's processes
      // together (judge, reference worker, candidate) asked for more than the card holds.
      f.status = VerdictStatus::kInternalError;
      f.message = fmt::format("{}: the GPU ran out of memory for crl's processes together, with this worker within its share "
                              "(crl's limit, not the program's): {}",
                              during, error->error);
    } else if (error->out_of_memory) {
      f.message = fmt::format("{}: out of its share of the GPU's memory: {}", during, error->error);
    }
    if (error->sticky) {
      // A sticky CUDA error: the worker exits after this reply (crl-worker's main), and the next
      // request goes to a fresh one. Waiting here makes the verdict say so and frees the GPU now.
      worker.await_exit(std::chrono::seconds(5));
      f.message += "; the worker " + worker.exit().describe();
    }
    return f;
  } catch (const worker::ChannelTimeout&) {
    return Failure::of(VerdictStatus::kTimeout, fmt::format("{}: no result within {:g} s; the worker was killed", during, timeout_seconds),
                       kill);
  } catch (const worker::ChannelClosed&) {
    return Failure::of(VerdictStatus::kCrash, fmt::format("{}: the worker {}", during, worker.exit().describe()), kill);
  } catch (const InputError& e) {
    return Failure::of(VerdictStatus::kCrash, fmt::format("{}: the worker sent a malformed reply ({})", during, e.what()), kill);
  }
}

}  // namespace crl::eval
