// The node-local watch over the job's ranks (rank_watch.h).
#include "rl/rank_watch.h"

#include <fmt/format.h>
#include <signal.h>

#include <cerrno>
#include <fstream>
#include <sstream>

namespace crl::rl {

std::string describe_dead_rank(const RankIdentity& rank) {
  return fmt::format("rank {} ({} on host {}, pid {}) died", rank.rank, rank.role, rank.host, rank.pid);
}

bool process_ended(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  // A zombie still answers kill(): its state in /proc/PID/stat (after the parenthesised name) is Z.
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z';
}

RankWatch::RankWatch(const std::vector<RankIdentity>& job, int self, const std::string& this_host,
                     std::function<void(const std::string&)> on_death, std::chrono::milliseconds period)
    : self_(self), on_death_(std::move(on_death)), period_(period) {
  for (const RankIdentity& r : job) {
    if (r.host == this_host && r.rank != self) peers_.push_back(r);
  }
  if (!peers_.empty()) thread_ = std::thread([this] { run(); });
}

RankWatch::~RankWatch() {
  disarm();
  if (thread_.joinable()) thread_.join();
}

void RankWatch::disarm() { armed_ = false; }

void RankWatch::run() {
  while (armed_) {
    std::this_thread::sleep_for(period_);
    for (const RankIdentity& peer : peers_) {
      if (!armed_ || !process_ended(peer.pid)) continue;
      // One report per node: from its lowest-numbered watching rank (a trainer) still alive.
      bool lowest = true;
      for (const RankIdentity& other : peers_) {
        if (other.role == "trainer" && other.rank < self_ && other.rank != peer.rank && !process_ended(other.pid)) lowest = false;
      }
      armed_ = false;
      if (lowest) on_death_(describe_dead_rank(peer));
      return;
    }
  }
}

}  // namespace crl::rl
