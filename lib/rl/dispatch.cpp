// Programs out, verdicts back, over dist's dispatch (dispatch.h).
#include "rl/dispatch.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"

namespace crl::rl {
namespace {

nlohmann::json payload_of(const WorkItem& w) { return {{"task", w.task}, {"program", w.program}, {"name", w.name}}; }

// The work message's payload, read strictly (rank 0 wrote it with payload_of).
WorkItem item_of(const dist::WorkOrder& order) {
  try {
    return {order.work_id, order.payload.at("task").get<std::string>(), order.payload.at("program").get<std::string>(),
            order.payload.at("name").get<std::string>()};
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("rank 0 sent unreadable work {}: {}", order.work_id, e.what()));
  }
}

// crl's own failure (the reference did not run, a channel broke): not the candidate's fault.
eval::Verdict internal_error(const WorkItem& w, const std::string& what) {
  eval::Verdict verdict;
  verdict.task_id = w.task;
  verdict.candidate = w.name;
  verdict.status = eval::VerdictStatus::kInternalError;
  verdict.message = what;
  verdict.reward = 0;
  return verdict;
}

}  // namespace

std::map<int64_t, DispatchedVerdict> ProgramDispatcher::evaluate(const std::vector<WorkItem>& items) {
  std::vector<dist::WorkOrder> orders;
  orders.reserve(items.size());
  for (const WorkItem& w : items) orders.push_back({w.work_id, w.task, payload_of(w)});
  std::map<int64_t, DispatchedVerdict> verdicts;
  for (auto& [id, result] : dispatcher_.run(orders)) {
    DispatchedVerdict d;
    try {
      d.verdict = eval::verdict_from_json(result.payload);
    } catch (const InputError& e) {
      throw Error(fmt::format("evaluator rank {} sent an unreadable verdict: {}", result.worker_rank, e.what()));
    }
    d.evaluator_rank = result.worker_rank;
    d.seconds = result.seconds;
    verdicts.emplace(id, std::move(d));
  }
  return verdicts;
}

void ProgramDispatcher::stop_all(const StopNotice& notice) {
  dispatcher_.stop_all({{"stopped", notice.stopped}, {"evaluation_failed", notice.evaluation_failed}});
}

StopNotice evaluator_loop(const dist::Group& world, const std::function<eval::Verdict(const WorkItem&)>& evaluate,
                          const std::function<int()>& stop_signal) {
  const nlohmann::json info = dist::serve_work(
      world,
      [&](const dist::WorkOrder& order) {
        const WorkItem w = item_of(order);
        eval::Verdict verdict;
        try {
          verdict = evaluate(w);
        } catch (const std::exception& e) {
          spdlog::error("evaluating {} ({}): {}", w.name, w.task, e.what());
          verdict = internal_error(w, e.what());
        }
        return eval::to_json(verdict);
      },
      stop_signal);
  try {
    return {info.at("stopped").get<std::string>(), info.at("evaluation_failed").get<bool>()};
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("rank 0's stop order is unreadable: {}", e.what()));
  }
}

}  // namespace crl::rl
