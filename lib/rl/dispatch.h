// Pull-based dispatch of candidate programs from rank 0 to the evaluator ranks, over MPI
// point-to-point messages of JSON text.
//
// An idle evaluator sends rank 0 a request (carrying the verdict of its previous program, if
// any) and blocks until rank 0 answers with the next program or with "stop". Rank 0 answers a
// request as soon as it has work, so a slow candidate holds only its own evaluator; a program of
// the task the evaluator judged last is preferred (its reference outputs are then reused), else
// the oldest in the queue. Verdicts cross as eval::to_json / verdict_from_json.
//
// Stop requests (stop_request.h): an evaluator that received a stop signal tells rank 0 once, in a
// note of its own tag, as soon as it is idle or done with its current program; rank 0 reads the
// notes at the job's step boundary (take_stop_signal). The "stop" message that ends an
// evaluator's loop carries what rank 0 adds (the job stopped, where), for the evaluator's log.
#pragma once

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "eval/verdict.h"

namespace crl::rl {

// Tags of the dispatch messages (MPI_COMM_WORLD).
inline constexpr int kTagRequest = 701;  // evaluator -> rank 0: {"verdict"?: ..., "work_id"?: n, "seconds"?: s}
inline constexpr int kTagWork = 702;     // rank 0 -> evaluator: {"work_id", "task", "program", "name"} or {"stop": true, ...}
inline constexpr int kTagStopNote = 703; // evaluator -> rank 0: {"signal": n}, once, when it received a stop signal
// Largest message accepted (a program, or a verdict with its truncated logs).
inline constexpr int64_t kMaxMessageBytes = 64 << 20;

// Sends `text` to `dest` with `tag` (blocking).
void send_text(MPI_Comm comm, int dest, int tag, const std::string& text);
// Receives one message with `tag` from `source` (or MPI_ANY_SOURCE); returns its text and sets
// *from. Messages longer than kMaxMessageBytes are refused (Error naming the sender).
std::string receive_text(MPI_Comm comm, int source, int tag, int* from);

struct WorkItem {
  int64_t work_id = 0;   // the caller's id (the rollout id)
  std::string task;
  std::string program;   // the program's text
  std::string name;      // for the verdict's `candidate`
};

struct DispatchedVerdict {
  eval::Verdict verdict;
  int evaluator_rank = -1;  // world rank
  double seconds = 0;       // evaluation time on the evaluator
};

// Rank 0's side. Evaluators are world ranks [first_evaluator, world size).
class Dispatcher {
 public:
  Dispatcher(MPI_Comm world, int first_evaluator);

  // Hands out every item and returns the verdicts by work id. Blocks until all are in;
  // `on_verdict(done, total)` runs after each (progress).
  std::map<int64_t, DispatchedVerdict> evaluate(const std::vector<WorkItem>& items,
                                                const std::function<void(size_t, size_t)>& on_verdict = {});
  // Tells every evaluator to stop (after its current request), with `info`'s keys added to the
  // "stop" message. Call once, at the end.
  void stop_all(const nlohmann::json& info = nlohmann::json::object());
  // The first stop signal an evaluator has noted (reads the notes that arrived so far without
  // waiting), or 0.
  int take_stop_signal();

  int evaluator_count() const { return evaluators_; }

 private:
  void handle_request(int from, const std::string& text, std::map<int64_t, DispatchedVerdict>& verdicts);
  MPI_Comm world_;
  int first_;
  int evaluators_;
  std::vector<int> idle_;                    // world ranks waiting for work, oldest first
  std::map<int, std::string> last_task_;     // by evaluator
  bool stopped_ = false;
  int stop_signal_ = 0;
};

// An evaluator rank's loop: requests work, evaluates it with `evaluate` (which returns a verdict
// for anything the candidate does; crl's own failures become internal_error verdicts here),
// answers, until rank 0 says stop; returns that "stop" message. `stop_signal` (polled while it
// waits for work, and after each program) returning non-zero sends rank 0 the stop note once.
nlohmann::json evaluator_loop(MPI_Comm world, const std::function<eval::Verdict(const WorkItem&)>& evaluate,
                              const std::function<int()>& stop_signal = {});

}  // namespace crl::rl
