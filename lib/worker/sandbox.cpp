// The candidate sandbox: no_new_privs, no capabilities, a Landlock ruleset (read anywhere, write only
// the scratch folder and device files) and a seccomp filter (a deny list of process, signal,
// tracing, scheduling, limit and network calls; everything a CUDA or LibTorch program needs stays
// allowed).
#include "worker/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/landlock.h"
#include "worker/guard_probe.h"

namespace crl::worker {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "crl's sandbox knows the system calls of x86-64 and aarch64 only"
#endif

constexpr uint32_t kArgLow(int i) { return static_cast<uint32_t>(offsetof(seccomp_data, args) + 8 * i); }
constexpr uint32_t kArgHigh(int i) { return kArgLow(i) + 4; }
constexpr uint32_t kDeny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
constexpr uint32_t kNoSys = SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA);

// A seccomp program built block by block; every block starts and ends with the syscall number in A.
class FilterBuilder {
 public:
  FilterBuilder() {
    add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0));
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
    load_nr();
#if defined(__x86_64__)
    // The x32 ABI's numbers (bit 30 set) would slip past the checks below.
    add(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
    add(BPF_STMT(BPF_RET | BPF_K, kDeny));
#endif
  }
  void deny(long nr, uint32_t ret = kDeny) {
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1));
    add(BPF_STMT(BPF_RET | BPF_K, ret));
  }
  // Allowed only when the low word of argument `arg` is one of `values`.
  void allow_only_if(long nr, int arg, const std::vector<uint32_t>& values) { membership(nr, arg, values, true); }
  // Denied when the low word of argument `arg` is one of `values`.
  void deny_if(long nr, int arg, const std::vector<uint32_t>& values) { membership(nr, arg, values, false); }
  // Allowed only when argument `arg` has `bit` set.
  void allow_only_with_bit(long nr, int arg, uint32_t bit) {
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 4));
    add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArgLow(arg)));
    add(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, bit, 1, 0));
    add(BPF_STMT(BPF_RET | BPF_K, kDeny));
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    load_nr();
  }
  // Allowed only for Unix stream or seqpacket sockets: argument 0 AF_UNIX, argument 1's type (its
  // flags masked off) SOCK_STREAM or SOCK_SEQPACKET (socket, socketpair).
  void allow_only_unix_streams(long nr) {
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 9));
    add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArgLow(0)));
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 1, 0));
    add(BPF_STMT(BPF_RET | BPF_K, kDeny));
    add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArgLow(1)));
    add(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf));  // the kernel's SOCK_TYPE_MASK
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 2, 0));
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_SEQPACKET, 1, 0));
    add(BPF_STMT(BPF_RET | BPF_K, kDeny));
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    load_nr();
  }
  // Allowed only when the 64-bit argument `arg` is zero (a null pointer).
  void allow_only_if_null(long nr, int arg) {
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 6));
    add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArgLow(arg)));
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3));
    add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArgHigh(arg)));
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1));
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    add(BPF_STMT(BPF_RET | BPF_K, kDeny));
    load_nr();
  }
  std::vector<sock_filter> finish() {
    add(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    return program_;
  }

 private:
  void add(sock_filter f) { program_.push_back(f); }
  void load_nr() { add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr))); }
  void membership(long nr, int arg, const std::vector<uint32_t>& values, bool listed_allowed) {
    const auto n = static_cast<uint8_t>(values.size());
    // 0: nr? 1: load arg; 2..n+1: compare; n+2: RET (not listed); n+3: RET (listed); n+4: reload nr.
    add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, static_cast<uint8_t>(n + 3)));
    add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArgLow(arg)));
    for (uint8_t k = 0; k < n; ++k) {
      add(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, values[k], static_cast<uint8_t>(n - k), 0));
    }
    add(BPF_STMT(BPF_RET | BPF_K, listed_allowed ? kDeny : SECCOMP_RET_ALLOW));
    add(BPF_STMT(BPF_RET | BPF_K, listed_allowed ? SECCOMP_RET_ALLOW : kDeny));
    load_nr();
  }
  std::vector<sock_filter> program_;
};

// The first filter, installed before anything runs: the rules a CUDA driver has started under (on
// the H200 since session 18).
std::vector<sock_filter> candidate_filter() {
  const auto self = static_cast<uint32_t>(getpid());
  const auto own_group = static_cast<uint32_t>(-static_cast<int32_t>(getpid()));
  FilterBuilder f;
  // No new programs or processes: threads only (clone3 says ENOSYS, so glibc falls back to clone).
  f.deny(SYS_execve);
  f.deny(SYS_execveat);
#ifdef SYS_fork
  f.deny(SYS_fork);
  f.deny(SYS_vfork);
#endif
  f.allow_only_with_bit(SYS_clone, 0, CLONE_THREAD);
  f.deny(SYS_clone3, kNoSys);
  // Signals and tracing reach only this process (the worker leads its own process group).
  f.allow_only_if(SYS_kill, 0, {self, 0, own_group});
  f.allow_only_if(SYS_tgkill, 0, {self});
  f.deny(SYS_tkill);
  f.allow_only_if(SYS_rt_sigqueueinfo, 0, {self});
  f.allow_only_if(SYS_rt_tgsigqueueinfo, 0, {self});
  for (long nr : {SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_process_madvise, SYS_pidfd_open,
                  SYS_pidfd_send_signal, SYS_pidfd_getfd, SYS_kcmp}) {
    f.deny(nr);
  }
  // The evaluator freezes and kills the worker through its process group, and reads its outputs
  // through process_vm_readv: the worker may not leave the group or hide its memory.
  f.deny(SYS_setsid);
  f.deny(SYS_setpgid);
  f.deny_if(SYS_prctl, 0, {PR_SET_DUMPABLE, PR_SET_PTRACER, PR_SET_PDEATHSIG});
  // Limits only go down from what the evaluator set (prlimit64 may read, not write).
  f.deny(SYS_setrlimit);
  f.allow_only_if_null(SYS_prlimit64, 2);
  // No network: Unix sockets only (the second filter narrows them further).
  f.allow_only_if(SYS_socket, 0, {AF_UNIX});
  f.allow_only_if(SYS_socketpair, 0, {AF_UNIX});
  // Namespaces, mounts, kernel objects and interfaces that would sidestep the rules above.
  for (long nr : {SYS_unshare, SYS_setns, SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot, SYS_bpf,
                  SYS_perf_event_open, SYS_io_uring_setup, SYS_kexec_load, SYS_init_module, SYS_finit_module,
                  SYS_delete_module, SYS_reboot, SYS_swapon, SYS_swapoff, SYS_fanotify_init, SYS_open_by_handle_at,
                  SYS_name_to_handle_at, SYS_userfaultfd}) {
    f.deny(nr);
  }
  return f.finish();
}

// Newer calls than the C library's headers may name (the same numbers on x86-64 and aarch64).
constexpr long kSysFchmodat2 = 452;
constexpr long kSysSetxattrat = 463;
constexpr long kSysRemovexattrat = 466;
constexpr long kSysFileSetattr = 469;

// The second filter, installed with the file rules once the device is set up (before the candidate's
// library loads, so a candidate never runs without it): the rules under which the H200's CUDA driver
// failed to start (error 304, the step sandbox_cuda of tools/gpu-measure.sh: some of those for
// scheduling, sockets or a file's owner; `--omit GROUP` tells which), and what Landlock leaves out
// or would outlast the worker. `omit`: groups left out, only for crl-worker --probe-cuda.
std::vector<sock_filter> late_filter(const std::vector<std::string>& omit) {
  const auto omitted = [&omit](const char* group) { return std::find(omit.begin(), omit.end(), group) != omit.end(); };
  const auto self = static_cast<uint32_t>(getpid());
  FilterBuilder f;
  if (!omitted("owner")) {
    // No signals through a file's owner: fcntl's F_SETOWN (F_SETOWN_EX) and a socket's FIOSETOWN
    // (SIOCSPGRP) name the process that the file's readiness signals (SIGIO, or whatever F_SETSIG
    // picks), which the kernel sends past the first filter's rules for kill(): a candidate made its
    // parent the owner of a pipe it wrote to, with SIGUSR2, and `crl eval` died
    // (attacks/owner_signal.cpu.crl).
    f.deny_if(SYS_fcntl, 1, {F_SETOWN, F_SETOWN_EX});
    f.deny_if(SYS_ioctl, 1, {FIOSETOWN, SIOCSPGRP});
  }
  if (!omitted("scheduling")) {
    // Scheduling stays the worker's own: another process's priority, CPU affinity, policy, I/O
    // priority or memory placement needs no privilege when the uid is the same, and would slow the
    // reference (or the judge) while the candidate is frozen: attacks/scheduling.cpu.crl, which put
    // every crl process at SCHED_IDLE and nice 19 on one core, was judged ok at 56x on the CPU.
    // setpriority and ioprio_set go altogether (with who 0, PRIO_PGRP and PRIO_USER, or their
    // ioprio twins, mean the whole group or every process of the user); the others keep pid 0 (the
    // calling thread) and the worker itself.
    f.deny(SYS_setpriority);
    f.deny(SYS_ioprio_set);
    for (long nr : {SYS_sched_setaffinity, SYS_sched_setscheduler, SYS_sched_setparam, SYS_sched_setattr, SYS_migrate_pages,
                    SYS_move_pages}) {
      f.allow_only_if(nr, 0, {0, self});
    }
  }
  if (!omitted("sockets")) {
    // No network, and no other process through a socket: Unix stream sockets only, and none may
    // connect, bind or listen, so only socketpair's connected pairs carry anything. A Unix socket
    // reached every listening one on the machine (attacks/unix_socket.cpu.crl; Landlock does not
    // cover connect), on a Slurm node slurmstepd's (a same-uid request signals or suspends the whole
    // job) and a job's PMIx server (which spawns processes outside the sandbox). Datagram sockets go
    // too: sendto with an address reaches any bound one. connect says ECONNREFUSED, what a client
    // probing for an absent server (the CUDA driver's for MPS) expects; so the workers cannot use MPS.
    f.allow_only_unix_streams(SYS_socket);
    f.allow_only_unix_streams(SYS_socketpair);
    f.deny(SYS_connect, SECCOMP_RET_ERRNO | (ECONNREFUSED & SECCOMP_RET_DATA));
    for (long nr : {SYS_bind, SYS_listen, SYS_accept, SYS_accept4}) f.deny(nr);
  }
  // Landlock governs opening, writing, linking and removing files, not their modes, owners, times
  // or extended attributes, which their owner may change on any path it can name: a candidate of a
  // crl run as root made a file of the machine world-writable with chmod. And the kernel keeps
  // System V shared memory, semaphores and message queues, POSIX message queues and keys after
  // their maker has gone: a candidate's segment, semaphore, queue and key were still there after its
  // evaluation (attacks/lasting_changes.cpu.crl), memory the storage watch never saw and a store a
  // later evaluation could read.
  std::vector<long> refused = {SYS_fchmod, SYS_fchmodat, kSysFchmodat2, SYS_fchown, SYS_fchownat, SYS_setxattr,
                               SYS_lsetxattr, SYS_fsetxattr, SYS_removexattr, SYS_lremovexattr, SYS_fremovexattr,
                               kSysSetxattrat, kSysRemovexattrat, kSysFileSetattr, SYS_utimensat, SYS_shmget, SYS_shmat,
                               SYS_shmctl, SYS_shmdt, SYS_semget, SYS_semop, SYS_semtimedop, SYS_semctl, SYS_msgget,
                               SYS_msgsnd, SYS_msgrcv, SYS_msgctl, SYS_mq_open, SYS_mq_unlink, SYS_mq_timedsend,
                               SYS_mq_timedreceive, SYS_mq_notify, SYS_mq_getsetattr, SYS_add_key, SYS_request_key, SYS_keyctl};
#ifdef SYS_chmod  // the older calls x86-64 still has beside their *at forms
  refused.insert(refused.end(), {SYS_chmod, SYS_chown, SYS_lchown, SYS_utime, SYS_utimes, SYS_futimesat});
#endif
  if (!omitted("files")) {
    for (long nr : refused) f.deny(nr);
  }
  return f.finish();
}

void install_filter(std::vector<sock_filter> program, const char* which) {
  sock_fprog fprog{static_cast<unsigned short>(program.size()), program.data()};
  // TSYNC: every thread LibTorch and the CUDA runtime already started gets the filter too.
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fprog) != 0) {
    throw Error(fmt::format("sandbox: installing the {} filter failed: {}", which, std::strerror(errno)));
  }
}

// Which threads the file rules reached, for the log line.
std::string describe_threads(const LandlockThreads& t) {
  if (t.tsync) return "every thread, by the kernel";
  std::string said = t.reached == 0 ? "its one thread" : fmt::format("every thread ({} started before, reached by a signal)", t.reached);
  if (!t.unreached.empty()) {
    said = fmt::format("{} earlier thread(s) reached by a signal, NOT {} that block it: {}", t.reached, t.unreached.size(),
                       fmt::join(t.unreached, ", "));
  }
  return said;
}

// Returns the ABI applied, or 0 with *why set when the kernel has no Landlock.
int apply_landlock(const SandboxPolicy& policy, std::string* why, LandlockThreads* threads) {
  LandlockRules rules;
  rules.readable = policy.readable_paths.empty() ? std::vector<std::string>{"/"} : policy.readable_paths;
  if (!policy.writable_dir.empty()) rules.writable_dirs = {policy.writable_dir};
  rules.writable_dirs.insert(rules.writable_dirs.end(), policy.probe_writable_dirs.begin(), policy.probe_writable_dirs.end());
  rules.writable_files = policy.writable_files;
  std::string missing;
  const int ruleset = build_landlock_ruleset(rules, &missing);
  if (ruleset < 0) {
    *why = missing + ": files outside the scratch folder stay writable";
    return 0;
  }
  // Every thread, the earlier ones too: on the GPU the rules go on after CUDA has started, and code
  // run on the driver's threads (a host function) wrote files in /tmp (attacks/driver_thread_write.cuda.crl).
  const int err = restrict_all_threads_to_landlock_ruleset(ruleset, threads);
  close(ruleset);
  if (err != 0) throw Error(fmt::format("sandbox: landlock_restrict_self failed: {}", std::strerror(err)));
  return landlock_abi();
}

// Clears the calling thread's capabilities (effective, permitted, inheritable, ambient and, where it
// may, the bounding set) and returns how many it held: none for an ordinary user; as root (CI
// machines, containers) every one, which would let a program read /dev/mem, reach processes of any
// uid, or raise what seccomp does not filter.
int drop_capabilities() {
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);  // (EINVAL where the kernel has no ambient set)
  // The bounding set needs CAP_SETPCAP to shrink, so it goes first (an ordinary user's EPERM is ignored).
  for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; ++cap) {
    if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) throw Error(fmt::format("sandbox: capget failed: {}", std::strerror(errno)));
  int held = 0;
  for (const auto& d : data) held += __builtin_popcount(d.permitted);
  std::memset(data, 0, sizeof data);
  if (syscall(SYS_capset, &header, data) != 0) throw Error(fmt::format("sandbox: dropping capabilities failed: {}", std::strerror(errno)));
  return held;
}

}  // namespace

std::vector<std::string> default_writable_device_files(GpuDeviceFiles which, int minor) {
  std::vector<std::string> files = {"/dev/null"};
  if (which == GpuDeviceFiles::none) return files;
  if (DIR* dir = opendir("/dev")) {
    while (const dirent* entry = readdir(dir)) {
      const char* name = entry->d_name;
      if (std::strncmp(name, "nvidia", 6) != 0) continue;
      // /dev/nvidia<digits> is one GPU's node; the others (nvidiactl, nvidia-uvm, nvidia-caps, ...)
      // are the driver's, which every CUDA process uses.
      const char* digits = name + 6;
      const bool gpu_node = *digits != '\0' && std::strspn(digits, "0123456789") == std::strlen(digits);
      if (which == GpuDeviceFiles::one && gpu_node && std::atoi(digits) != minor) continue;
      files.push_back(std::string("/dev/") + name);
    }
    closedir(dir);
  }
  return files;
}

std::vector<std::string> default_readable_paths(const std::vector<std::string>& extra) {
  // Of /dev only the files a program uses: a worker of a crl run as root could otherwise read every
  // device its uid owns (the consoles' screens through /dev/vcs*, the terminals, and on most
  // machines the disks), and the node's compile locks in /dev/shm.
  // (The writable device files, /dev/null and the GPU's, are readable through their own rules.)
  // Of /proc only this process's own folder and the machine-wide files a runtime reads (the CPUs,
  // the memory, kernel settings, the NVIDIA driver's): another process's cmdline, stat or schedstat
  // would tell a program when the judge or the reference runs, and which request it is in.
  std::vector<std::string> paths = {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache",
                                    "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/proc/" + std::to_string(getpid()),
                                    "/proc/cpuinfo", "/proc/meminfo", "/proc/sys", "/proc/driver", "/proc/filesystems",
                                    "/sys", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"};
  auto add = [&paths](const std::string& p) {
    if (p.empty() || p == "/") return;
    for (const auto& q : paths) {
      if (q == p) return;
    }
    paths.push_back(p);
  };
  if (FILE* maps = std::fopen("/proc/self/maps", "r")) {
    char line[4096];
    while (std::fgets(line, sizeof line, maps) != nullptr) {
      const char* slash = std::strchr(line, '/');
      if (slash == nullptr) continue;
      std::string file(slash);
      while (!file.empty() && (file.back() == '\n' || file.back() == ' ')) file.pop_back();
      if (const size_t deleted = file.find(" (deleted)"); deleted != std::string::npos) file.resize(deleted);
      add(file.substr(0, file.rfind('/')));
      if (const size_t site = file.find("/site-packages/"); site != std::string::npos) {
        add(file.substr(0, site + std::strlen("/site-packages")));
      }
    }
    std::fclose(maps);
  }
  for (const auto& p : extra) add(p);
  return paths;
}

SandboxReport apply_sandbox(const SandboxPolicy& policy) {
  SandboxReport report;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    throw Error(fmt::format("sandbox: PR_SET_NO_NEW_PRIVS failed: {}", std::strerror(errno)));
  }
  report.no_new_privs = true;
  if (policy.drop_capabilities) {
    report.capabilities_dropped = drop_capabilities();
    // Threads started before keep theirs: say so, for the log (crl-worker drops them before any start).
    if (const int others = count_process_threads() - 1; others > 0 && report.capabilities_dropped > 0) {
      report.threads_keeping_capabilities = others;
    }
  }
  std::string missing;
  if (policy.landlock) report.landlock_abi = apply_landlock(policy, &missing, &report.landlock_threads);
  if (policy.seccomp) {
    install_filter(candidate_filter(), "seccomp");
    report.seccomp = true;
  }
  if (policy.late_filter) {
    install_filter(late_filter(policy.probe_filter_omit), "second seccomp");
    report.late_filter = true;
  }
  report.detail = fmt::format("sandbox: no_new_privs, {}{}, {}{}{}",
                              policy.drop_capabilities
                                  ? fmt::format("{} capabilities dropped{}, ", report.capabilities_dropped,
                                                report.threads_keeping_capabilities > 0
                                                    ? fmt::format(" ({} earlier threads keep theirs)", report.threads_keeping_capabilities)
                                                    : "")
                                  : "",
                              report.landlock_abi > 0 ? fmt::format("Landlock ABI {} (writes only in {}; reads {}; {})",
                                                                    report.landlock_abi, policy.writable_dir,
                                                                    policy.readable_paths.empty()
                                                                        ? std::string("anywhere")
                                                                        : fmt::format("{} folders", policy.readable_paths.size()),
                                                                    describe_threads(report.landlock_threads))
                                                      : "no Landlock",
                              report.seccomp ? "seccomp (no exec, fork, foreign signals, tracing, network)"
                              : report.late_filter ? "" : "no seccomp",
                              report.late_filter ? fmt::format("{}a second seccomp filter (no scheduling of others, socket connections, "
                                                               "file owners' signals, file modes, owners, times or attributes, "
                                                               "System V IPC, message queues or keys)",
                                                               report.seccomp ? ", " : "")
                                                 : "",
                              missing.empty() ? "" : "; " + missing);
  return report;
}

SandboxReport apply_sandbox_before_device(const SandboxPolicy& policy) {
  SandboxPolicy first = policy;
  first.landlock = false;
  first.late_filter = false;
  return apply_sandbox(first);
}

SandboxReport apply_sandbox_after_device(const SandboxPolicy& policy, bool gpu, int gpu_minor) {
  SandboxPolicy rest = policy;
  rest.seccomp = false;            // the first filter is on
  rest.drop_capabilities = false;  // dropped before the device's threads started
  rest.writable_files = default_writable_device_files(
      !gpu ? GpuDeviceFiles::none : gpu_minor >= 0 ? GpuDeviceFiles::one : GpuDeviceFiles::all, gpu_minor);
  return apply_sandbox(rest);
}

}  // namespace crl::worker
