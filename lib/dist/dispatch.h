// Pull-based dispatch of work from rank 0 to worker ranks (the job's evaluators) over a dist::Group,
// in typed messages. What a piece of work and its result hold is the caller's (a JSON payload):
// rl/dispatch.h sends programs and receives verdicts through it.
//
// An idle worker sends rank 0 a request (carrying the result of its previous work, if any) and
// blocks until rank 0 answers with the next work or with a stop order. Rank 0 answers a request as
// soon as it has work, so slow work holds only its own worker; work of the affinity the worker had
// last is preferred (an evaluator then reuses the task's reference outputs), else the oldest.
//
// Stop requests: a worker that received a stop signal tells rank 0 once, in a note of its own tag,
// as soon as it is idle or done with its current work; rank 0 reads the notes when it asks
// (take_stop_signal). The stop order that ends a worker's loop carries what rank 0 adds (for the
// job: that it stopped, and where).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dist/group.h"

namespace crl::dist {

// Tags of the dispatch messages.
inline constexpr int kTagRequest = 701;   // worker -> rank 0: WorkRequest
inline constexpr int kTagWork = 702;      // rank 0 -> worker: WorkMessage
inline constexpr int kTagStopNote = 703;  // worker -> rank 0: StopNote, once, when it received a stop signal

struct WorkOrder {
  int64_t work_id = 0;        // the caller's id (the job: the rollout id)
  std::string affinity;       // work of the same affinity goes to the same worker first (the task)
  nlohmann::json payload;     // what the worker needs (the job: task, program, name)
};

struct WorkResult {
  int64_t work_id = 0;
  double seconds = 0;         // the work's time on the worker
  nlohmann::json payload;     // what the work gave (the job: the verdict)
  int worker_rank = -1;       // the sender (set by rank 0 on receipt; not sent)
};

struct WorkRequest {
  std::optional<WorkResult> done;  // the previous work's result (none in a worker's first request)
};

struct WorkMessage {
  std::optional<WorkOrder> work;  // none: stop
  nlohmann::json stop_info;       // with a stop: what rank 0 adds (an object)
};

struct StopNote {
  int signal = 0;  // > 0
};

void to_json(nlohmann::json& j, const WorkOrder& w);
void from_json(const nlohmann::json& j, WorkOrder& w);
void to_json(nlohmann::json& j, const WorkResult& r);
void from_json(const nlohmann::json& j, WorkResult& r);
void to_json(nlohmann::json& j, const WorkRequest& r);
void from_json(const nlohmann::json& j, WorkRequest& r);
void to_json(nlohmann::json& j, const WorkMessage& m);
void from_json(const nlohmann::json& j, WorkMessage& m);
void to_json(nlohmann::json& j, const StopNote& n);
void from_json(const nlohmann::json& j, StopNote& n);

// Rank 0's side. Workers are ranks [first_worker, group size).
class Dispatcher {
 public:
  Dispatcher(Group group, int first_worker);

  // Hands out every order and returns the results by work id; blocks until all are in.
  std::map<int64_t, WorkResult> run(const std::vector<WorkOrder>& orders);
  // Tells every worker to stop (after its current request), with `info` (an object) in the
  // order. Call once, at the end; later calls do nothing.
  void stop_all(const nlohmann::json& info);
  // The first stop signal a worker has noted (reads the notes that arrived so far without
  // waiting), or 0.
  int take_stop_signal();

 private:
  // Records a request's result (if any) in `results` and its sender as idle.
  void take_request(std::map<int64_t, WorkResult>& results);
  // Sends the oldest order of the worker's last affinity (else the oldest) to `rank`.
  void hand_out(int rank, std::vector<const WorkOrder*>& queue);

  Group group_;
  int first_;
  int workers_;
  std::vector<int> idle_;                 // ranks waiting for work, oldest first
  std::map<int, std::string> last_affinity_;  // by worker
  bool stopped_ = false;
  int stop_signal_ = 0;
};

// A worker rank's loop: requests work, does it with `work` (its result's payload), answers, until
// rank 0 sends a stop order; returns that order's info. `stop_signal` (polled while the worker
// waits for work, and after each piece) returning non-zero sends rank 0 the stop note once.
nlohmann::json serve_work(const Group& group, const std::function<nlohmann::json(const WorkOrder&)>& work,
                          const std::function<int()>& stop_signal = {});

}  // namespace crl::dist
