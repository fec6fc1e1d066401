// A per-node budget of concurrent compiler processes, shared by every process on the node (the
// job's evaluator ranks, crl eval, tests): N lock files in a node-local folder, each held with
// flock by one running compiler. A process that dies releases its slots with its descriptors.
#pragma once

#include <string>

namespace crl {

class NodeSlots {
 public:
  // `dir` is created if needed; `slots` >= 1.
  NodeSlots(std::string dir, int slots);
  int slots() const { return slots_; }
  const std::string& dir() const { return dir_; }

  // Holds one slot for its lifetime; waits (polling every 10 ms) until one is free.
  class Hold {
   public:
    explicit Hold(const NodeSlots& slots);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    int slot() const { return slot_; }

   private:
    int fd_ = -1;
    int slot_ = -1;
  };

  // Slots held right now by anyone on the node (tests and `crl doctor`).
  int busy() const;

 private:
  std::string dir_;
  int slots_;
};

// The node's budget: $CRL_NODE_COMPILE_SLOTS, else the machine's hardware threads.
int default_node_compile_slots();
// Where the node's slots live: /dev/shm/crl-compile-slots-<uid> (memory, never shared between
// nodes), else $TMPDIR or /tmp.
std::string default_node_slots_dir();

}  // namespace crl
