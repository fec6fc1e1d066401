// Landlock rulesets built from folder lists, and their application (see landlock.h).
#include "core/landlock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/process_env.h"

namespace crl {
namespace {

// The access rights this kernel's Landlock ABI handles (and the header knows).
uint64_t handled_rights(int abi) {
  uint64_t rights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
                    LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                    LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                    LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                    LANDLOCK_ACCESS_FS_MAKE_SYM;
#ifdef LANDLOCK_ACCESS_FS_REFER
  if (abi >= 2) rights |= LANDLOCK_ACCESS_FS_REFER;
#endif
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
  if (abi >= 3) rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
#endif
  (void)abi;
  return rights;
}

constexpr uint64_t kFileWriteRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
                                      | LANDLOCK_ACCESS_FS_TRUNCATE
#endif
    ;

void add_rule(int ruleset, const std::string& path, uint64_t allowed, uint64_t handled) {
  const int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return;  // a path that does not exist here needs no rule
  landlock_path_beneath_attr rule{};
  rule.allowed_access = allowed & handled;
  rule.parent_fd = fd;
  const long r = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
  const int err = errno;
  close(fd);
  if (r != 0) throw Error(fmt::format("landlock_add_rule({}) failed: {}", path, std::strerror(err)));
}

constexpr unsigned kRestrictSelfTsync = 1U << 3;  // LANDLOCK_RESTRICT_SELF_TSYNC (Linux 7.0, ABI 8)

// What the handler run on each earlier thread needs and leaves: only atomics and system calls, as a
// signal handler may use.
constexpr int kMaxAcks = 4096;
std::atomic<int> g_ruleset{-1};
std::atomic<int> g_acks{0};
std::atomic<pid_t> g_acked_tid[kMaxAcks];
std::atomic<int> g_acked_error[kMaxAcks];

void restrict_this_thread(int) {
  const int saved = errno;
  int error = 0;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_landlock_restrict_self, g_ruleset.load(), 0) != 0) error = errno;
  const int i = g_acks.fetch_add(1);
  if (i < kMaxAcks) {
    g_acked_error[i].store(error);
    g_acked_tid[i].store(static_cast<pid_t>(syscall(SYS_gettid)));
  }
  errno = saved;
}

std::string thread_name(pid_t tid) {
  std::ifstream comm(fmt::format("/proc/self/task/{}/comm", tid));
  std::string name;
  std::getline(comm, name);
  return name.empty() ? "?" : name;
}

}  // namespace

int landlock_abi(std::string* why) {
  const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) {
    if (why != nullptr) *why = fmt::format("Landlock not available ({})", std::strerror(errno));
    return 0;
  }
  return static_cast<int>(abi);
}

int build_landlock_ruleset(const LandlockRules& rules, std::string* why) {
  const int abi = landlock_abi(why);
  if (abi == 0) return -1;
  const uint64_t handled = handled_rights(abi);
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = handled;
  const int ruleset = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
  if (ruleset < 0) throw Error(fmt::format("landlock_create_ruleset failed: {}", std::strerror(errno)));
  fcntl(ruleset, F_SETFD, FD_CLOEXEC);
  try {
    const uint64_t read_only = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_EXECUTE;
    for (const auto& path : rules.readable) {
      struct stat st{};
      const bool is_dir = stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      add_rule(ruleset, path, is_dir ? read_only : (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_EXECUTE), handled);
    }
    for (const auto& dir : rules.writable_dirs) add_rule(ruleset, dir, handled, handled);
    for (const auto& file : rules.writable_files) add_rule(ruleset, file, kFileWriteRights, handled);
  } catch (...) {
    close(ruleset);
    throw;
  }
  return ruleset;
}

int restrict_to_landlock_ruleset(int ruleset) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) return errno;
  return 0;
}

int restrict_all_threads_to_landlock_ruleset(int ruleset, LandlockThreads* threads, double wait_seconds) {
  *threads = {};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (landlock_abi() >= 8 && syscall(SYS_landlock_restrict_self, ruleset, kRestrictSelfTsync) == 0) {
    threads->tsync = true;
    return 0;
  }
  if (const int err = restrict_to_landlock_ruleset(ruleset); err != 0) return err;
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  g_ruleset.store(ruleset);
  for (int i = 0; i < std::min(g_acks.load(), kMaxAcks); ++i) g_acked_tid[i].store(0);  // (a second call in one process)
  g_acks.store(0);
  const int signal = SIGRTMIN + 4;  // glibc keeps the first two real-time signals; nothing of crl's uses this one
  struct sigaction action{}, previous{};
  action.sa_handler = restrict_this_thread;
  action.sa_flags = SA_RESTART;  // a thread's interrupted system call goes on (glibc's setxid broadcast does the same)
  sigfillset(&action.sa_mask);
  if (sigaction(signal, &action, &previous) != 0) return errno;
  // Listed again after each round: a thread not yet restricted may have started another, which
  // inherits its unrestricted credentials; once every listed thread is restricted, new ones are too.
  std::set<pid_t> sent, acked;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_seconds);
  for (;;) {
    bool sent_more = false;
    for (const pid_t tid : process_thread_ids()) {
      if (tid == self || sent.count(tid)) continue;
      sent.insert(tid);
      if (syscall(SYS_tgkill, getpid(), tid, signal) == 0) sent_more = true;
      else acked.insert(tid);  // gone already
    }
    for (;;) {
      const int n = std::min(g_acks.load(), kMaxAcks);
      for (int i = 0; i < n; ++i) {
        const pid_t tid = g_acked_tid[i].load();
        if (tid == 0 || acked.count(tid)) continue;
        acked.insert(tid);
        if (g_acked_error[i].load() == 0) {
          ++threads->reached;
        } else {
          threads->unreached.push_back(fmt::format("{} ({}: {})", tid, thread_name(tid), std::strerror(g_acked_error[i].load())));
        }
      }
      const bool all = std::all_of(sent.begin(), sent.end(), [&](pid_t tid) { return acked.count(tid) > 0; });
      if (all || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (!sent_more || std::chrono::steady_clock::now() > deadline) break;
  }
  for (const pid_t tid : sent) {
    if (acked.count(tid) == 0 && access(fmt::format("/proc/self/task/{}", tid).c_str(), F_OK) == 0) {
      threads->unreached.push_back(fmt::format("{} ({})", tid, thread_name(tid)));
    }
  }
  if (threads->unreached.empty()) {
    sigaction(signal, &previous, nullptr);
  } else {
    // The signal stays pending on a thread that blocks it: the handler stays (the default action of
    // a real-time signal ends the process), with its own copy of the ruleset, so that thread
    // restricts itself whenever it unblocks the signal.
    g_ruleset.store(fcntl(ruleset, F_DUPFD_CLOEXEC, 0));
  }
  return 0;
}

}  // namespace crl
