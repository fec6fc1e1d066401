// Pull-based dispatch over a dist::Group: the messages, rank 0's Dispatcher and the workers' loop
// (dispatch.h).
#include "dist/dispatch.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/clock.h"
#include "core/error.h"

namespace crl::dist {

// ---- messages (strict: .at(), so a missing field is an error) ----

void to_json(nlohmann::json& j, const WorkOrder& w) {
  j = {{"work_id", w.work_id}, {"affinity", w.affinity}, {"payload", w.payload}};
}
void from_json(const nlohmann::json& j, WorkOrder& w) {
  w.work_id = j.at("work_id").get<int64_t>();
  w.affinity = j.at("affinity").get<std::string>();
  w.payload = j.at("payload");
}
void to_json(nlohmann::json& j, const WorkResult& r) {
  j = {{"work_id", r.work_id}, {"seconds", r.seconds}, {"payload", r.payload}};
}
void from_json(const nlohmann::json& j, WorkResult& r) {
  r.work_id = j.at("work_id").get<int64_t>();
  r.seconds = j.at("seconds").get<double>();
  r.payload = j.at("payload");
}
void to_json(nlohmann::json& j, const WorkRequest& r) {
  j = nlohmann::json::object();
  if (r.done) j["done"] = *r.done;
}
void from_json(const nlohmann::json& j, WorkRequest& r) {
  if (!j.is_object()) throw InputError("a work request is a JSON object");
  r.done.reset();
  if (j.contains("done")) r.done = j.at("done").get<WorkResult>();
}
void to_json(nlohmann::json& j, const WorkMessage& m) {
  if (m.work) {
    j = {{"work", *m.work}};
  } else {
    j = {{"stop", m.stop_info}};
  }
}
void from_json(const nlohmann::json& j, WorkMessage& m) {
  if (!j.is_object() || j.size() != 1) throw InputError("a work message is an object of one key, work or stop");
  m.work.reset();
  m.stop_info = nlohmann::json::object();
  if (j.contains("work")) {
    m.work = j.at("work").get<WorkOrder>();
  } else {
    m.stop_info = j.at("stop");
    if (!m.stop_info.is_object()) throw InputError("a stop order's info is a JSON object");
  }
}
void to_json(nlohmann::json& j, const StopNote& n) { j = {{"signal", n.signal}}; }
void from_json(const nlohmann::json& j, StopNote& n) {
  n.signal = j.at("signal").get<int>();
  if (n.signal <= 0) throw InputError("a stop note without a signal number");
}

// ---- rank 0 ----

Dispatcher::Dispatcher(Group group, int first_worker)
    : group_(group), first_(first_worker), workers_(group.size() - first_worker) {}

void Dispatcher::take_request(std::map<int64_t, WorkResult>& results) {
  int from = -1;
  const std::string text = group_.receive_text(MPI_ANY_SOURCE, kTagRequest, &from);
  if (from < first_) throw Error(fmt::format("work request from rank {}, which is not a worker", from));
  WorkRequest request = Group::decode<WorkRequest>(text, "a work request", from);
  if (request.done) {
    request.done->worker_rank = from;
    const int64_t id = request.done->work_id;
    results[id] = std::move(*request.done);
  }
  idle_.push_back(from);
}

void Dispatcher::hand_out(int rank, std::vector<const WorkOrder*>& queue) {
  auto pick = queue.begin();
  if (const auto last = last_affinity_.find(rank); last != last_affinity_.end()) {
    const auto same = std::find_if(queue.begin(), queue.end(), [&](const WorkOrder* w) { return w->affinity == last->second; });
    if (same != queue.end()) pick = same;
  }
  const WorkOrder& order = **pick;
  queue.erase(pick);
  last_affinity_[rank] = order.affinity;
  group_.send(rank, kTagWork, WorkMessage{order, nlohmann::json::object()});
}

std::map<int64_t, WorkResult> Dispatcher::run(const std::vector<WorkOrder>& orders) {
  std::map<int64_t, WorkResult> results;
  if (orders.empty()) return results;
  if (workers_ < 1) throw Error("the job has work to hand out but no worker ranks");
  std::vector<const WorkOrder*> queue;
  for (const WorkOrder& order : orders) queue.push_back(&order);
  while (results.size() < orders.size()) {
    // Work to every idle worker, same affinity first.
    while (!idle_.empty() && !queue.empty()) {
      const int rank = idle_.front();
      idle_.erase(idle_.begin());
      hand_out(rank, queue);
    }
    take_request(results);
  }
  return results;
}

int Dispatcher::take_stop_signal() {
  while (const std::optional<int> sender = group_.pending(MPI_ANY_SOURCE, kTagStopNote)) {
    int from = -1;
    const StopNote note = group_.receive<StopNote>(*sender, kTagStopNote, &from, "a stop note");
    spdlog::info("evaluator rank {} received a stop signal ({})", from, note.signal);
    if (stop_signal_ == 0) stop_signal_ = note.signal;
  }
  return stop_signal_;
}

void Dispatcher::stop_all(const nlohmann::json& info) {
  if (stopped_) return;
  stopped_ = true;
  // Every worker is either idle (its request already received) or will send one request.
  std::vector<bool> told(static_cast<size_t>(first_ + workers_), false);
  int remaining = workers_;
  const WorkMessage stop{std::nullopt, info};
  for (int rank : idle_) {
    group_.send(rank, kTagWork, stop);
    told[static_cast<size_t>(rank)] = true;
    --remaining;
  }
  idle_.clear();
  while (remaining > 0) {
    int from = -1;
    group_.receive_text(MPI_ANY_SOURCE, kTagRequest, &from);
    if (from < first_ || told[static_cast<size_t>(from)]) continue;
    group_.send(from, kTagWork, stop);
    told[static_cast<size_t>(from)] = true;
    --remaining;
  }
  take_stop_signal();  // notes sent before the workers saw the stop are received, not left behind
}

// ---- workers ----

namespace {

// Waits for rank 0's next work message, polling so that a stop signal that arrives meanwhile is
// noted at once (a blocking probe would hold it until the next piece of work).
WorkMessage wait_for_work(const Group& group, const std::function<void()>& poll) {
  for (;;) {
    if (group.pending(0, kTagWork)) return group.receive<WorkMessage>(0, kTagWork, nullptr, "a work message");
    poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

nlohmann::json serve_work(const Group& group, const std::function<nlohmann::json(const WorkOrder&)>& work,
                          const std::function<int()>& stop_signal) {
  bool noted = false;
  const auto note_stop = [&] {
    if (noted || !stop_signal) return;
    if (const int signal = stop_signal(); signal != 0) {
      group.send(0, kTagStopNote, StopNote{signal});
      noted = true;
    }
  };
  WorkRequest request;
  for (;;) {
    note_stop();
    group.send(0, kTagRequest, request);
    const WorkMessage message = wait_for_work(group, note_stop);
    if (!message.work) return message.stop_info;
    const WorkOrder& order = *message.work;
    const auto start = std::chrono::steady_clock::now();
    nlohmann::json result = work(order);
    request.done = WorkResult{order.work_id, seconds_since(start), std::move(result)};
  }
}

}  // namespace crl::dist
