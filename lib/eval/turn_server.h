// The evaluator's side of a timed batch's turns (CPU backend; worker/call_turns.h): before the batch
// it reveals the first call's inputs; then, on a thread of its own while the program runs, each time
// a call returns it reads a secret sample of that call's outputs from the worker's memory and only
// then copies the next call's inputs from the staging arena (which the judge filled and no program
// worker maps) into the program's arena. So no call can read a later call's inputs, and a call that
// returns before its outputs are computed (work left for a later call to do in one go) is seen when
// its slot is the one checked: its outputs then differ from the sample read at its turn.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "worker/call_turns.h"
#include "worker/exchange.h"

namespace crl::eval {

// Where one program's batch takes its turns: its arena as the evaluator maps it (turn page included)
// and the staging arena's slots.
struct TurnPlace {
  char* arena = nullptr;
  const char* staging = nullptr;
  const worker::ArenaLayout* layout = nullptr;
  pid_t worker = -1;
};

class TurnServer {
 public:
  // sample_seed picks the bytes read from each call's outputs (drawn from the task's secret).
  TurnServer(const TurnPlace& place, std::vector<int64_t> slots, uint64_t sample_seed);
  ~TurnServer();
  TurnServer(const TurnServer&) = delete;
  TurnServer& operator=(const TurnServer&) = delete;

  // Before the batch's request (the worker frozen): reveals the first call's inputs, then serves
  // the other turns on a thread until stop().
  void start();
  // After the worker's reply or failure: ends the thread.
  void stop();
  // The evaluator's own work inside the batch (the reveals after the first, the samples): taken out
  // of the batch's time, alike for both programs, by the evaluator's clock.
  double served_seconds() const { return served_seconds_; }
  int turns_served() const { return turns_served_; }
  // A call's time by the evaluator's clock: from its turn to the evaluator seeing it return
  // (its worker's wake-up and its signal included, a few microseconds). Calls after the first
  // (the first starts with the request itself); nullopt for a batch of one call. The mean of the
  // calls no longer than 4x their median: a call stretched by the scheduler (another process's
  // time slice on a loaded machine, milliseconds) says nothing of the program, and one cannot
  // shift work into it (the next call's inputs are not there yet; a call's outputs are sampled
  // as it returns). `dropped`: how many were left out.
  std::optional<double> per_call_seconds(int* dropped) const;
  // A call whose published outputs could not be read (crl's worker publishes them: only a program
  // that wrote over the turn page gets here).
  const std::optional<std::string>& problem() const { return problem_; }
  // After stop(), the worker frozen: whether call `call`'s outputs, as the batch's reply names them,
  // are the ones it published at its turn and still hold the bytes sampled then. A message when not.
  std::optional<std::string> changed_since_turn(size_t call, const std::vector<worker::TensorRef>& refs) const;

 private:
  struct Sample {
    size_t output = 0;
    uint64_t address = 0;
    std::vector<uint8_t> bytes;
  };
  struct Turn {
    std::vector<worker::TurnPage::Span> outputs;
    std::vector<Sample> samples;
  };
  void serve();
  void reveal(size_t call);
  void record(size_t call);

  TurnPlace place_;
  worker::TurnPage* page_;
  std::vector<int64_t> slots_;
  uint64_t sample_seed_;
  std::vector<Turn> turns_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::vector<double> call_seconds_;  // calls 1.. of the batch, from their turn to their return
  double served_seconds_ = 0;
  int turns_served_ = 0;
  std::optional<std::string> problem_;
};

}  // namespace crl::eval
