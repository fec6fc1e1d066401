// The candidate worker's sandbox: what a program may do to the world outside its own process.
// Applied by crl-worker (candidate role) after LibTorch and the device are initialised and before
// the candidate's library is loaded, so the candidate's own static initialisers already run in it.
#pragma once

#include <string>
#include <vector>

#include "core/landlock.h"

namespace crl::worker {

struct SandboxPolicy {
  std::string writable_dir;                 // the evaluation's scratch folder: the only place files may be written
  std::vector<std::string> writable_files;  // device files that must stay writable (/dev/null, /dev/nvidia*)
  // Where files may be read; empty: everywhere. default_readable_paths() gives what a LibTorch
  // and CUDA process needs (its libraries, /usr, /proc, /sys, /dev) plus the folders named.
  std::vector<std::string> readable_paths;
  bool landlock = true;                     // restrict file access (Linux 5.13+, where the kernel allows it)
  bool seccomp = true;                      // refuse process, signal, tracing and network system calls
  // A second filter, installed with the file rules once the device is set up: no scheduling of
  // other processes, no socket connections, no signals through a file's owner (rules the H200's
  // CUDA driver does not start under), and nothing Landlock leaves out (file modes, owners, times,
  // extended attributes) or that would outlast the worker (System V IPC, POSIX message queues, keys).
  bool late_filter = true;
  // Clear the process's capabilities (root's: CI machines and containers run crl as root).
  // Capabilities belong to each thread: apply it before any thread starts.
  bool drop_capabilities = true;
  // More folders writable like writable_dir: only for `crl-worker --probe-cuda --write DIR`, which
  // looks for what a machine's CUDA driver writes while it starts (it fails to under the file rules).
  std::vector<std::string> probe_writable_dirs;
  // Groups of the second filter's rules left out ("owner", "scheduling", "sockets", "files"):
  // likewise only for `crl-worker --probe-cuda --omit GROUP`.
  std::vector<std::string> probe_filter_omit;
};

// What was applied, for the worker's log and the verdict (a kernel without Landlock says so here).
struct SandboxReport {
  bool no_new_privs = false;
  int landlock_abi = 0;          // 0: not applied
  bool seccomp = false;
  bool late_filter = false;
  int capabilities_dropped = 0;          // how many the calling thread held (0 for an ordinary user)
  int threads_keeping_capabilities = 0;  // threads started before, which keep theirs
  LandlockThreads landlock_threads;      // how the file rules reached the threads started before
  std::string detail;            // one line: what was applied and what the kernel did not allow
};

// Which of the GPUs' device files a worker keeps: none (a program of the CPU backend), every one,
// or one GPU's: the driver's shared files (nvidiactl, nvidia-uvm, ...) and that GPU's own node,
// /dev/nvidia<minor>. A worker sees one GPU (CUDA_VISIBLE_DEVICES), but a program could load a
// second copy of the driver's library and reach any node it may open.
enum class GpuDeviceFiles { none, all, one };

// The device files a worker keeps writing after start: /dev/null and the GPUs' (`which`; `minor`
// names the GPU's node for GpuDeviceFiles::one).
std::vector<std::string> default_writable_device_files(GpuDeviceFiles which = GpuDeviceFiles::all, int minor = -1);

// What a worker must still be able to read: system and toolchain folders (/usr, /lib*, /opt is
// not among them), the dynamic loader's cache, of /proc this process's own folder and the
// machine-wide files (cpuinfo, meminfo, sys, driver, filesystems; not other processes'), /sys, the device files a program only reads
// (/dev/zero, full, random, urandom; the writable ones are readable too), the folder of every file this
// process has mapped (its libraries) and the site-packages folder of a Python-installed LibTorch
// (its CUDA libraries load lazily), plus `extra` (the task's folder, the compile cache).
std::vector<std::string> default_readable_paths(const std::vector<std::string>& extra);

// Applies the policy to the calling process and every thread it creates afterwards (threads that
// already exist keep their old rights for file access: apply it before the program starts any).
// After it, the process holds no capabilities and cannot start programs or processes (execve,
// fork, clone without CLONE_THREAD), signal or trace another process, change another process's
// scheduling (priority, affinity, policy, I/O priority, memory placement), change its session,
// group, dumpability or limits, name another process as a file's owner (which SIGIO reaches), open
// network or datagram sockets, connect, bind or listen (only socketpair's Unix stream pairs work),
// write files outside writable_dir and writable_files, change any file's mode, owner, times or
// extended attributes, or use System V IPC, POSIX message queues or keys. Throws Error when a step
// the kernel supports fails; steps the kernel lacks are reported, not fatal.
SandboxReport apply_sandbox(const SandboxPolicy& policy);

// A candidate worker applies the policy in two parts around its device's start, because the H200's
// CUDA driver does not start under the second (error 304). Before anything runs: the first
// seccomp filter and the capability drop (each thread's: threads started later inherit none).
SandboxReport apply_sandbox_before_device(const SandboxPolicy& policy);
// Once the device is set up, before the candidate's library loads: the Landlock ruleset and the
// second filter (which reaches the threads the driver started: TSYNC), keeping of the GPUs'
// device files none for a CPU program (`gpu` false), else the driver's and this GPU's node
// (`gpu_minor`; every GPU's when it is -1, not known). Replaces policy.writable_files.
SandboxReport apply_sandbox_after_device(const SandboxPolicy& policy, bool gpu, int gpu_minor);

}  // namespace crl::worker
