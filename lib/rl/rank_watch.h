// A watch over the job's other ranks on this node: a rank that dies (kill -9, the OOM killer, a
// crash) ends the job with a message that names its rank, role and host, instead of leaving its
// peers to wait for it. Ranks on other nodes are not watched here: their launcher reports them
// (mpirun and srun name the rank and the node; /meta hosts of the results file gives the role).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace crl::rl {

struct RankIdentity {
  int rank = 0;
  std::string role;  // "trainer" or "evaluator"
  std::string host;
  pid_t pid = 0;
};

// "rank 3 (evaluator on host node07, pid 4242) died" for a rank that is gone.
std::string describe_dead_rank(const RankIdentity& rank);
// Whether the process `pid` of this host has ended (gone, or a zombie not yet reaped).
bool process_ended(pid_t pid);

class RankWatch {
 public:
  // Watches the ranks of `job` (all of the job's ranks; those on `this_host` other than `self`)
  // from a thread that polls every `period`. The job's trainers watch (evaluators, which leave as
  // soon as rank 0 tells them to, do not). When a rank has ended, the node's lowest-numbered
  // trainer still alive calls `on_death` with describe_dead_rank's message, once.
  RankWatch(const std::vector<RankIdentity>& job, int self, const std::string& this_host,
            std::function<void(const std::string&)> on_death,
            std::chrono::milliseconds period = std::chrono::milliseconds(100));
  ~RankWatch();
  RankWatch(const RankWatch&) = delete;
  RankWatch& operator=(const RankWatch&) = delete;

  // Stops watching: call when the job ends, before any rank may leave (a rank that has
  // finished is not a rank that died).
  void disarm();

 private:
  void run();
  std::vector<RankIdentity> peers_;
  int self_;
  std::function<void(const std::string&)> on_death_;
  std::chrono::milliseconds period_;
  std::atomic<bool> armed_{true};
  std::thread thread_;
};

}  // namespace crl::rl
