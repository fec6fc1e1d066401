// NodeSlots: flock-held lock files, one per concurrent compiler process allowed on the node.
#include "compile/node_slots.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "core/error.h"

namespace crl {
namespace {

std::string slot_path(const std::string& dir, int i) { return fmt::format("{}/slot-{:03d}.lock", dir, i); }

}  // namespace

int default_node_compile_slots() {
  if (const char* env = std::getenv("CRL_NODE_COMPILE_SLOTS"); env != nullptr && env[0] != '\0') {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 1 || n > 4096) {
      throw InputError(fmt::format("CRL_NODE_COMPILE_SLOTS must be a whole number from 1 to 4096, not '{}'", env));
    }
    return static_cast<int>(n);
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string default_node_slots_dir() {
  const std::string name = fmt::format("crl-compile-slots-{}", getuid());
  if (access("/dev/shm", W_OK) == 0) return "/dev/shm/" + name;
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/" + name;
}

NodeSlots::NodeSlots(std::string dir, int slots) : dir_(std::move(dir)), slots_(slots) {
  if (slots_ < 1) throw InputError("a node compile budget needs at least one slot");
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw_io_error("cannot create the compile-slot folder", dir_);
}

NodeSlots::Hold::Hold(const NodeSlots& slots) {
  thread_local std::mt19937 rng(std::random_device{}());
  for (;;) {
    const int first = static_cast<int>(rng() % static_cast<unsigned>(slots.slots()));
    for (int k = 0; k < slots.slots(); ++k) {
      const int i = (first + k) % slots.slots();
      const int fd = open(slot_path(slots.dir(), i).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
      if (fd < 0) throw_io_error("cannot open a compile-slot lock", slot_path(slots.dir(), i));
      if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        fd_ = fd;
        slot_ = i;
        return;
      }
      close(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

NodeSlots::Hold::~Hold() {
  if (fd_ >= 0) close(fd_);  // closing releases the flock
}

int NodeSlots::busy() const {
  int n = 0;
  for (int i = 0; i < slots_; ++i) {
    const int fd = open(slot_path(dir_, i).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ++n;
    } else {
      flock(fd, LOCK_UN);
    }
    close(fd);
  }
  return n;
}

}  // namespace crl
