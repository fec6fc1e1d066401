// The candidate sandbox, tried as a candidate would: each forbidden act in a child process that
// applied the sandbox, and the legitimate twin of each (threads, files in its folder) still works.
#include "worker/sandbox.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

namespace crl::worker {
namespace {

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/crl-sandbox-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `act` in a sandboxed child; returns its exit code (0: the act succeeded, 1: it was
  // refused, 2: the sandbox itself failed, 3: something else went wrong).
  int in_sandbox(const std::function<bool()>& act, bool landlock = true) {
    const pid_t pid = fork();
    if (pid == 0) {
      try {
        apply_sandbox({dir_, {"/dev/null"}, {}, landlock, true});
      } catch (...) {
        _exit(2);
      }
      _exit(act() ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
  }
  std::string dir_;
};

TEST_F(SandboxTest, CannotStartAProgram) {
  EXPECT_EQ(in_sandbox([] {
              char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
              execv("/bin/true", argv);
              return false;  // still here: refused
            }),
            1);
}

TEST_F(SandboxTest, CannotForkButCanStartThreads) {
  EXPECT_EQ(in_sandbox([] {
              const pid_t p = fork();
              if (p == 0) _exit(0);
              return p > 0;
            }),
            1);
  EXPECT_EQ(in_sandbox([] {
              std::atomic<int> ran{0};
              std::thread t([&] { ran = 1; });
              t.join();
              return ran == 1;
            }),
            0);
}

// Each act sets what the target already has (its own nice value, its own CPUs), so a sandbox that
// let one through would fail the test without slowing the test process.
TEST_F(SandboxTest, CannotChangeAnotherProcesssSchedulingButCanItsOwn) {
  EXPECT_EQ(in_sandbox([] { return setpriority(PRIO_PROCESS, getppid(), getpriority(PRIO_PROCESS, getppid())) == 0; }), 1);
  EXPECT_EQ(in_sandbox([] { return setpriority(PRIO_USER, 0, getpriority(PRIO_USER, 0)) == 0; }), 1);
  const auto same_cpus = [](pid_t pid) {
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    return sched_getaffinity(pid, sizeof cpus, &cpus) == 0 && sched_setaffinity(pid, sizeof cpus, &cpus) == 0;
  };
  EXPECT_EQ(in_sandbox([&] { return same_cpus(getppid()); }), 1);
  EXPECT_EQ(in_sandbox([&] { return same_cpus(0); }), 0);
  EXPECT_EQ(in_sandbox([] {
              sched_param p{};
              return sched_setscheduler(getppid(), sched_getscheduler(getppid()), &p) == 0;
            }),
            1);
}

// (The bounding set shrinks only with CAP_SETPCAP, so an ordinary user's stays full; it matters
// only for execve, which the filter refuses.)
TEST_F(SandboxTest, HoldsNoCapabilities) {
  const bool root = geteuid() == 0;
  EXPECT_EQ(in_sandbox([root] {
              FILE* status = std::fopen("/proc/self/status", "r");
              if (status == nullptr) _exit(3);
              char line[256];
              int empty = 0;
              while (std::fgets(line, sizeof line, status) != nullptr) {
                for (const char* set : {"CapInh:", "CapPrm:", "CapEff:", "CapAmb:", root ? "CapBnd:" : "-"}) {
                  if (std::strncmp(line, set, std::strlen(set)) == 0 && std::strstr(line, "0000000000000000") != nullptr) ++empty;
                }
              }
              std::fclose(status);
              return empty == (root ? 5 : 4);
            }),
            0);
}

TEST_F(SandboxTest, CannotSignalItsParentButCanSignalItself) {
  EXPECT_EQ(in_sandbox([] { return kill(getppid(), 0) == 0; }), 1);
  EXPECT_EQ(in_sandbox([] { return kill(-1, 0) == 0; }), 1);
  EXPECT_EQ(in_sandbox([] { return kill(getpid(), 0) == 0; }), 0);
}

// A file's owner gets the signals its readiness raises, past kill()'s rules: none may be named
// (each act names this very process, whose signal would go nowhere harmful).
TEST_F(SandboxTest, CannotNameAProcessAsAFilesOwner) {
  const auto owned = [](const std::function<int(int)>& name_owner) {
    int pair[2];
    return socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0 && name_owner(pair[0]) == 0;
  };
  EXPECT_EQ(in_sandbox([&] { return owned([](int fd) { return fcntl(fd, F_SETOWN, getpid()); }); }), 1);
  EXPECT_EQ(in_sandbox([&] {
              return owned([](int fd) {
                f_owner_ex ex{F_OWNER_PID, getpid()};
                return fcntl(fd, F_SETOWN_EX, &ex);
              });
            }),
            1);
  EXPECT_EQ(in_sandbox([&] {
              return owned([](int fd) {
                const pid_t self = getpid();
                return ioctl(fd, FIOSETOWN, &self);
              });
            }),
            1);
  EXPECT_EQ(in_sandbox([&] { return owned([](int fd) { return fcntl(fd, F_GETOWN) == 0 ? 0 : -1; }); }), 0);
}

// What Landlock does not cover (a file's mode, owner, times, attributes) and what outlives a process
// (System V IPC, POSIX message queues, keys) are refused by the second filter; files in its own
// folder still work.
TEST_F(SandboxTest, ChangesNoFilesMetadataAndLeavesNoKernelObjects) {
  const std::string file = dir_ + "/mine.txt";
  { const int fd = open(file.c_str(), O_WRONLY | O_CREAT, 0600); ASSERT_GE(fd, 0); close(fd); }
  EXPECT_EQ(in_sandbox([&] { return chmod(file.c_str(), 0600) == 0; }), 1);
  EXPECT_EQ(in_sandbox([&] { return utimensat(AT_FDCWD, file.c_str(), nullptr, 0) == 0; }), 1);
  EXPECT_EQ(in_sandbox([&] { return chown(file.c_str(), getuid(), getgid()) == 0; }), 1);
  EXPECT_EQ(in_sandbox([&] { return setxattr(file.c_str(), "user.crl", "x", 1, 0) == 0 || errno != EPERM; }), 1);
  EXPECT_EQ(in_sandbox([] { return shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600) >= 0; }), 1);
  EXPECT_EQ(in_sandbox([] { return semget(IPC_PRIVATE, 1, IPC_CREAT | 0600) >= 0; }), 1);
  EXPECT_EQ(in_sandbox([] { return msgget(IPC_PRIVATE, IPC_CREAT | 0600) >= 0; }), 1);
  EXPECT_EQ(in_sandbox([] { return syscall(SYS_add_key, "user", "crl-sandbox-test", "x", 1, -4 /* the user's keyring */) >= 0; }), 1);
  EXPECT_EQ(in_sandbox([&] {
              const int fd = open(file.c_str(), O_RDWR);
              return fd >= 0 && write(fd, "x", 1) == 1 && unlink(file.c_str()) == 0;
            }),
            0);
}

TEST_F(SandboxTest, CannotLeaveItsGroupOrHideItsMemory) {
  EXPECT_EQ(in_sandbox([] { return setsid() >= 0; }), 1);
  EXPECT_EQ(in_sandbox([] { return setpgid(0, 0) == 0; }), 1);
  EXPECT_EQ(in_sandbox([] { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0; }), 1);
}

// Unix stream sockets exist, but only socketpair's connected pairs carry anything: no connect,
// bind or listen (another process's socket is out of reach), no datagram sockets (sendto with an
// address would reach any bound one).
TEST_F(SandboxTest, NoNetworkAndNoOtherProcessThroughASocket) {
  EXPECT_EQ(in_sandbox([] { return socket(AF_INET, SOCK_STREAM, 0) >= 0; }), 1);
  EXPECT_EQ(in_sandbox([] { return socket(AF_INET6, SOCK_DGRAM, 0) >= 0; }), 1);
  EXPECT_EQ(in_sandbox([] { return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) >= 0; }), 0);
  EXPECT_EQ(in_sandbox([] { return socket(AF_UNIX, SOCK_DGRAM, 0) >= 0; }), 1);
  EXPECT_EQ(in_sandbox([] {
              int pair[2];
              if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return false;
              char c = 'x';
              return write(pair[0], &c, 1) == 1 && read(pair[1], &c, 1) == 1 && c == 'x';
            }),
            0);
  EXPECT_EQ(in_sandbox([] {
              int pair[2];
              return socketpair(AF_UNIX, SOCK_DGRAM, 0, pair) == 0;
            }),
            1);
  EXPECT_EQ(in_sandbox([] {
              const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
              sockaddr_un address{};
              address.sun_family = AF_UNIX;
              std::strcpy(address.sun_path + 1, "crl-sandbox-test");  // abstract: nothing on disk
              const auto length = static_cast<socklen_t>(sizeof(sa_family_t) + 1 + std::strlen("crl-sandbox-test"));
              const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0;
              const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), length) == 0 || errno != ECONNREFUSED;
              return bound || connected || listen(fd, 1) == 0;
            }),
            1);
}

TEST_F(SandboxTest, LimitsOnlyGoDown) {
  EXPECT_EQ(in_sandbox([] {
              rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
              return setrlimit(RLIMIT_AS, &unlimited) == 0;
            }),
            1);
  EXPECT_EQ(in_sandbox([] {
              rlimit now{};
              return getrlimit(RLIMIT_AS, &now) == 0;
            }),
            0);
}

TEST_F(SandboxTest, WritesOnlyInItsFolderWhereTheKernelHasLandlock) {
  const std::string inside = dir_ + "/ok.txt";
  EXPECT_EQ(in_sandbox([&] {
              const int fd = open(inside.c_str(), O_WRONLY | O_CREAT, 0600);
              return fd >= 0 && write(fd, "x", 1) == 1;
            }),
            0);
  // /proc/self/mem is how a program would rewrite its own code (or the timer's): not writable.
  const int self_mem = in_sandbox([] { return open("/proc/self/mem", O_RDWR) >= 0; });
  const std::string outside = "/tmp/crl-sandbox-outside-" + std::to_string(getpid());
  const int outside_write = in_sandbox([&] { return open(outside.c_str(), O_WRONLY | O_CREAT, 0600) >= 0; });
  std::filesystem::remove(outside);
  const int abi = [&] {
    const pid_t pid = fork();
    if (pid == 0) _exit(apply_sandbox({dir_, {}, {}, true, false}).landlock_abi);
    int status = 0;
    waitpid(pid, &status, 0);
    return WEXITSTATUS(status);
  }();
  if (abi == 0) GTEST_SKIP() << "this kernel has no Landlock: file writes are not confined here";
  EXPECT_EQ(self_mem, 1);
  EXPECT_EQ(outside_write, 1);
  EXPECT_EQ(in_sandbox([] { return open("/etc/hostname", O_RDONLY) >= 0; }), 0);  // reading stays allowed
}

// With the worker's read list: its libraries and the toolchain stay readable, the machine's other
// files do not (a program that prints /etc/passwd into its log would put it in the results file).
TEST_F(SandboxTest, ReadsOnlyTheToolchainAndWhatItIsGiven) {
  const std::string given = dir_ + "/given.txt";
  { const int fd = open(given.c_str(), O_WRONLY | O_CREAT, 0600); ASSERT_GE(fd, 0); close(fd); }
  auto reads = [&](const std::string& path) {
    const pid_t pid = fork();
    if (pid == 0) {
      SandboxPolicy p;
      p.writable_dir = dir_;
      p.readable_paths = default_readable_paths({});
      const auto report = apply_sandbox(p);
      if (report.landlock_abi == 0) _exit(3);
      _exit(open(path.c_str(), O_RDONLY) >= 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WEXITSTATUS(status);
  };
  const int passwd = reads("/etc/passwd");
  if (passwd == 3) GTEST_SKIP() << "this kernel has no Landlock: file reads are not confined here";
  EXPECT_EQ(passwd, 1);
  EXPECT_EQ(reads("/etc/hostname"), 1);
  EXPECT_EQ(reads("/usr/include/stdio.h"), 0);
  EXPECT_EQ(reads("/proc/self/status"), 0);
  EXPECT_EQ(reads(given), 0);  // its own folder
}

// A thread started before the file rules (on the GPU the CUDA driver's: the rules go on once CUDA
// has started) is held to them too: code run on it (a host function, a signal handler) wrote in
// /tmp before. Its legitimate twin: the same thread still writes in the worker's folder.
TEST_F(SandboxTest, ThreadsStartedBeforeTheRulesWriteOnlyInItsFolderToo) {
  const std::string outside = "/tmp/crl-sandbox-earlier-thread-" + std::to_string(getpid());
  const std::string inside = dir_ + "/earlier-thread.txt";
  const pid_t pid = fork();
  if (pid == 0) {
    std::atomic<int> command{0}, outside_wrote{-2}, inside_wrote{-2};
    std::thread earlier([&] {
      while (command.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const int out = open(outside.c_str(), O_WRONLY | O_CREAT, 0600);
      outside_wrote = out >= 0 ? 1 : 0;
      const int in = open(inside.c_str(), O_WRONLY | O_CREAT, 0600);
      inside_wrote = in >= 0 ? 1 : 0;
    });
    SandboxReport report;
    try {
      report = apply_sandbox({dir_, {"/dev/null"}, {}, true, true});
    } catch (...) {
      _exit(20);
    }
    command = 1;
    earlier.join();
    if (report.landlock_abi == 0) _exit(3);
    if (outside_wrote != 0 || inside_wrote != 1) _exit(4 + outside_wrote * 2 + inside_wrote);
    _exit(report.landlock_threads.tsync || report.landlock_threads.reached == 1 ? 0 : 10 + report.landlock_threads.reached);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::filesystem::remove(outside);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "this kernel has no Landlock: file writes are not confined here";
  // 4 + 2 * (wrote outside) + (wrote inside); 10 + n: the rules reached n earlier threads.
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A thread that blocks every signal cannot be reached before the rules go on: the report names it,
// the process lives on, and the thread holds itself to the rules as soon as it lets the signal in.
TEST_F(SandboxTest, AnEarlierThreadBlockingSignalsIsNamedAndRestrictedWhenItUnblocks) {
  const std::string outside = "/tmp/crl-sandbox-blocking-thread-" + std::to_string(getpid());
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    std::atomic<int> command{0}, outside_wrote{-2};
    std::atomic<bool> blocking{false};
    std::thread earlier([&] {
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_BLOCK, &all, nullptr);
      pthread_setname_np(pthread_self(), "crl-blocker");
      blocking = true;
      while (command.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      pthread_sigmask(SIG_UNBLOCK, &all, nullptr);  // the pending signal's handler runs here
      const int out = open(outside.c_str(), O_WRONLY | O_CREAT, 0600);
      outside_wrote = out >= 0 ? 1 : 0;
    });
    while (!blocking.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    SandboxReport report;
    try {
      report = apply_sandbox({dir_, {"/dev/null"}, {}, true, true});
    } catch (...) {
      _exit(20);
    }
    std::string said = report.landlock_threads.tsync ? "tsync" : "";
    for (const auto& thread : report.landlock_threads.unreached) said += thread + "; ";
    (void)!write(pipe_fds[1], said.data(), said.size());
    command = 1;
    earlier.join();
    if (report.landlock_abi == 0) _exit(3);
    _exit(outside_wrote == 0 ? 0 : 1);
  }
  close(pipe_fds[1]);
  std::string said;
  char buffer[512];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof buffer)) > 0;) said.append(buffer, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  std::filesystem::remove(outside);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status) << "; " << said;
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "this kernel has no Landlock: file writes are not confined here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the thread wrote outside its folder after unblocking; " << said;
  if (said != "tsync") EXPECT_NE(said.find("(crl-blocker)"), std::string::npos) << said;
}

}  // namespace
}  // namespace crl::worker
