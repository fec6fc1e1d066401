// Pull-based program dispatch over MPI (protocol in dispatch.h).
#include "rl/dispatch.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "dist/mpi_check.h"

namespace crl::rl {

void send_text(MPI_Comm comm, int dest, int tag, const std::string& text) {
  if (static_cast<int64_t>(text.size()) > kMaxMessageBytes) {
    throw Error(fmt::format("dispatch message to rank {} is {} bytes, over the {} byte limit", dest, text.size(),
                            kMaxMessageBytes));
  }
  CRL_MPI_CHECK(MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, dest, tag, comm));
}

std::string receive_text(MPI_Comm comm, int source, int tag, int* from) {
  // Polled with a growing sleep (50 us to 2 ms), not MPI_Probe: Open MPI's blocking probe spins a
  // core for as long as it waits (a quarter of a CPU on the trainer rank, taken from the evaluator's
  // workers on a 2-core machine), and a message here answers seconds of work, so 2 ms is nothing.
  MPI_Status status;
  for (auto pause = std::chrono::microseconds(50);; pause = std::min(pause * 2, std::chrono::microseconds(2000))) {
    int pending = 0;
    CRL_MPI_CHECK(MPI_Iprobe(source, tag, comm, &pending, &status));
    if (pending) break;
    std::this_thread::sleep_for(pause);
  }
  int count = 0;
  CRL_MPI_CHECK(MPI_Get_count(&status, MPI_CHAR, &count));
  if (count < 0 || count > kMaxMessageBytes) {
    throw Error(fmt::format("dispatch message from rank {} claims {} bytes (limit {})", status.MPI_SOURCE, count,
                            kMaxMessageBytes));
  }
  std::string text(static_cast<size_t>(count), '\0');
  CRL_MPI_CHECK(MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, tag, comm, MPI_STATUS_IGNORE));
  if (from != nullptr) *from = status.MPI_SOURCE;
  return text;
}

Dispatcher::Dispatcher(MPI_Comm world, int first_evaluator) : world_(world), first_(first_evaluator) {
  int size = 0;
  CRL_MPI_CHECK(MPI_Comm_size(world, &size));
  evaluators_ = size - first_evaluator;
}

void Dispatcher::handle_request(int from, const std::string& text, std::map<int64_t, DispatchedVerdict>& verdicts) {
  if (from < first_) throw Error(fmt::format("dispatch request from rank {}, which is not an evaluator", from));
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) throw Error(fmt::format("evaluator rank {} sent a request that is not a JSON object", from));
  if (j.contains("verdict")) {
    if (!j.contains("work_id") || !j["work_id"].is_number_integer()) {
      throw Error(fmt::format("evaluator rank {} sent a verdict without its work_id", from));
    }
    DispatchedVerdict d;
    try {
      d.verdict = eval::verdict_from_json(j["verdict"]);
    } catch (const InputError& e) {
      throw Error(fmt::format("evaluator rank {} sent an unreadable verdict: {}", from, e.what()));
    }
    d.evaluator_rank = from;
    d.seconds = j.value("seconds", 0.0);
    verdicts[j["work_id"].get<int64_t>()] = std::move(d);
  }
  idle_.push_back(from);
}

std::map<int64_t, DispatchedVerdict> Dispatcher::evaluate(const std::vector<WorkItem>& items,
                                                          const std::function<void(size_t, size_t)>& on_verdict) {
  std::map<int64_t, DispatchedVerdict> verdicts;
  if (items.empty()) return verdicts;
  if (evaluators_ < 1) throw Error("the job has programs to evaluate but no evaluator ranks");
  std::vector<const WorkItem*> queue;
  for (const WorkItem& item : items) queue.push_back(&item);
  size_t in_flight = 0;
  while (verdicts.size() < items.size()) {
    // Hand out work to every idle evaluator, same task first.
    while (!idle_.empty() && !queue.empty()) {
      const int rank = idle_.front();
      idle_.erase(idle_.begin());
      auto pick = queue.begin();
      if (const auto last = last_task_.find(rank); last != last_task_.end()) {
        const auto same = std::find_if(queue.begin(), queue.end(), [&](const WorkItem* w) { return w->task == last->second; });
        if (same != queue.end()) pick = same;
      }
      const WorkItem& w = **pick;
      queue.erase(pick);
      last_task_[rank] = w.task;
      send_text(world_, rank, kTagWork,
                nlohmann::json{{"work_id", w.work_id}, {"task", w.task}, {"program", w.program}, {"name", w.name}}.dump());
      ++in_flight;
    }
    int from = -1;
    const std::string text = receive_text(world_, MPI_ANY_SOURCE, kTagRequest, &from);
    const size_t before = verdicts.size();
    handle_request(from, text, verdicts);
    if (verdicts.size() > before) {
      --in_flight;
      if (on_verdict) on_verdict(verdicts.size(), items.size());
    }
  }
  return verdicts;
}

int Dispatcher::take_stop_signal() {
  for (;;) {
    int pending = 0;
    MPI_Status status;
    CRL_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kTagStopNote, world_, &pending, &status));
    if (!pending) return stop_signal_;
    int from = -1;
    const auto j = nlohmann::json::parse(receive_text(world_, status.MPI_SOURCE, kTagStopNote, &from), nullptr, false);
    const int signal = j.is_object() && j.contains("signal") && j["signal"].is_number_integer() ? j["signal"].get<int>() : 0;
    if (signal <= 0) throw Error(fmt::format("evaluator rank {} sent a stop note without a signal number", from));
    spdlog::info("evaluator rank {} received a stop signal ({})", from, signal);
    if (stop_signal_ == 0) stop_signal_ = signal;
  }
}

void Dispatcher::stop_all(const nlohmann::json& info) {
  if (stopped_) return;
  stopped_ = true;
  // Every evaluator is either idle (its request already received) or will send one request.
  std::vector<bool> told(static_cast<size_t>(first_ + evaluators_), false);
  int remaining = evaluators_;
  nlohmann::json message = info;
  message["stop"] = true;
  const std::string stop = message.dump();
  for (int rank : idle_) {
    send_text(world_, rank, kTagWork, stop);
    told[static_cast<size_t>(rank)] = true;
    --remaining;
  }
  idle_.clear();
  while (remaining > 0) {
    int from = -1;
    receive_text(world_, MPI_ANY_SOURCE, kTagRequest, &from);
    if (from < first_ || told[static_cast<size_t>(from)]) continue;
    send_text(world_, from, kTagWork, stop);
    told[static_cast<size_t>(from)] = true;
    --remaining;
  }
  take_stop_signal();  // notes sent before the evaluators saw "stop" are received, not left behind
}

namespace {

// Waits for rank 0's next work message, polling so that a stop signal that arrives meanwhile is
// noted at once (a blocking probe would hold it until the next program).
std::string wait_for_work(MPI_Comm world, const std::function<void()>& poll) {
  for (;;) {
    int pending = 0;
    CRL_MPI_CHECK(MPI_Iprobe(0, kTagWork, world, &pending, MPI_STATUS_IGNORE));
    if (pending) return receive_text(world, 0, kTagWork, nullptr);
    poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

nlohmann::json evaluator_loop(MPI_Comm world, const std::function<eval::Verdict(const WorkItem&)>& evaluate,
                              const std::function<int()>& stop_signal) {
  bool noted = false;
  const auto note_stop = [&] {
    if (noted || !stop_signal) return;
    if (const int signal = stop_signal(); signal != 0) {
      send_text(world, 0, kTagStopNote, nlohmann::json{{"signal", signal}}.dump());
      noted = true;
    }
  };
  nlohmann::json request = nlohmann::json::object();
  for (;;) {
    note_stop();
    send_text(world, 0, kTagRequest, request.dump());
    const std::string text = wait_for_work(world, note_stop);
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) throw Error("rank 0 sent a work message that is not a JSON object");
    if (j.value("stop", false)) return j;
    WorkItem w;
    w.work_id = j.at("work_id").get<int64_t>();
    w.task = j.at("task").get<std::string>();
    w.program = j.at("program").get<std::string>();
    w.name = j.at("name").get<std::string>();
    const auto start = std::chrono::steady_clock::now();
    eval::Verdict verdict;
    try {
      verdict = evaluate(w);
    } catch (const std::exception& e) {
      // crl's own failure (the reference did not run, a channel broke): not the candidate's fault.
      spdlog::error("evaluating {} ({}): {}", w.name, w.task, e.what());
      verdict.task_id = w.task;
      verdict.candidate = w.name;
      verdict.status = eval::VerdictStatus::kInternalError;
      verdict.message = e.what();
      verdict.reward = 0;
    }
    const double seconds = seconds_since(start);
    request = {{"verdict", eval::to_json(verdict)}, {"work_id", w.work_id}, {"seconds", seconds}};
  }
}

}  // namespace crl::rl
