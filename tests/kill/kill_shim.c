/* kill_shim: an LD_PRELOAD fault injector for the kill-at-every-write tests (tests/kill). It
 * counts the calls that change files under $CRL_KILL_DIR (write, pwrite, writev, copy_file_range,
 * ftruncate, fsync, fdatasync, open with O_CREAT, mkdir, rename, link, unlink, rmdir and their *at
 * forms) and, at the $CRL_KILL_AT-th, dies by SIGKILL: a write first does the first half of its
 * bytes (a torn write, as a node failure leaves one), every other call dies before it happens.
 * With $CRL_KILL_SIGNAL set (a number: 15 for SIGTERM) it sends that signal instead at the
 * $CRL_KILL_AT-th call and lets the call and the program go on: a stop that arrives in the middle
 * of writing a checkpoint, at a chosen write. With $CRL_KILL_COUNT_FILE set it writes the number of
 * such calls there at exit ("%p" in it becomes the pid, for MPI jobs), so a test knows how many
 * kill points a run has.
 *   LD_PRELOAD=libcrl_kill_shim.so CRL_KILL_DIR=/tmp/d CRL_KILL_AT=17 program ...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static char g_dir[PATH_MAX];
static size_t g_dir_len;
static long g_kill_at = -1;
static long g_count;
static int g_signal;
static int g_ready;

static void setup(void) {
  if (g_ready) return;
  g_ready = 1;
  const char* dir = getenv("CRL_KILL_DIR");
  if (dir != NULL && realpath(dir, g_dir) != NULL) g_dir_len = strlen(g_dir);
  const char* at = getenv("CRL_KILL_AT");
  if (at != NULL) g_kill_at = atol(at);
  const char* signal = getenv("CRL_KILL_SIGNAL");
  if (signal != NULL) g_signal = atoi(signal);
}

__attribute__((destructor)) static void report_count(void) {
  const char* pattern = getenv("CRL_KILL_COUNT_FILE");
  if (pattern == NULL) return;
  /* "%p" in the name becomes the pid: each rank of an MPI job writes its own count. */
  char file[PATH_MAX];
  const char* at = strstr(pattern, "%p");
  if (at != NULL) {
    snprintf(file, sizeof file, "%.*s%d%s", (int)(at - pattern), pattern, (int)getpid(), at + 2);
  } else {
    snprintf(file, sizeof file, "%s", pattern);
  }
  char text[32];
  const int n = snprintf(text, sizeof text, "%ld\n", g_count);
  /* Raw syscalls: this runs after the program's own exit handlers, and must not count itself. */
  const int fd = (int)syscall(SYS_openat, AT_FDCWD, file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    syscall(SYS_write, fd, text, (size_t)n);
    syscall(SYS_close, fd);
  }
}

static int in_dir(const char* absolute) {
  if (g_dir_len == 0 || absolute == NULL) return 0;
  return strncmp(absolute, g_dir, g_dir_len) == 0 && (absolute[g_dir_len] == '/' || absolute[g_dir_len] == '\0');
}

static int fd_path(int fd, char* out, size_t size) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, out, size - 1);
  if (n < 0) return 0;
  out[n] = '\0';
  return 1;
}

static int fd_in_dir(int fd) {
  setup();
  char path[PATH_MAX];
  return fd_path(fd, path, sizeof path) && in_dir(path);
}

/* `path` relative to `dirfd` (AT_FDCWD: the working folder) made absolute, without resolving
 * links: the folder part is all the test needs. */
static int at_in_dir(int dirfd, const char* path) {
  setup();
  if (path == NULL || g_dir_len == 0) return 0;
  if (path[0] == '/') return in_dir(path);
  char base[PATH_MAX], full[2 * PATH_MAX];
  if (dirfd == AT_FDCWD) {
    if (getcwd(base, sizeof base) == NULL) return 0;
  } else if (!fd_path(dirfd, base, sizeof base)) {
    return 0;
  }
  snprintf(full, sizeof full, "%s/%s", base, path);
  return in_dir(full);
}

/* One more kill point; true when this is the one to die at. With CRL_KILL_SIGNAL the signal goes
 * out here and the call goes on. */
static int is_kill_point(void) {
  if (++g_count != g_kill_at) return 0;
  if (g_signal == 0) return 1;
  kill(getpid(), g_signal);
  return 0;
}

/* For a writer that loads its libraries once and forks a child per kill point (two process starts
 * a kill point cost more than the writes they test): a child calls this (found with dlsym, present
 * only when the shim is preloaded) after setting $CRL_KILL_AT, and counts from zero again. */
void crl_kill_shim_rearm(void) {
  g_ready = 0;
  g_dir_len = 0;
  g_kill_at = -1;
  g_signal = 0;
  g_count = 0;
  setup();
}
long crl_kill_shim_count(void) { return g_count; }

static void die(void) {
  kill(getpid(), SIGKILL);
  _exit(137); /* not reached */
}

#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

ssize_t write(int fd, const void* buf, size_t n) {
  ssize_t (*real)(int, const void*, size_t) = REAL("write", ssize_t (*)(int, const void*, size_t));
  if (fd_in_dir(fd) && is_kill_point()) {
    if (n > 1) real(fd, buf, n / 2);
    die();
  }
  return real(fd, buf, n);
}

static ssize_t shim_pwrite(const char* name, int fd, const void* buf, size_t n, off_t offset) {
  ssize_t (*real)(int, const void*, size_t, off_t) = REAL(name, ssize_t (*)(int, const void*, size_t, off_t));
  if (fd_in_dir(fd) && is_kill_point()) {
    if (n > 1) real(fd, buf, n / 2, offset);
    die();
  }
  return real(fd, buf, n, offset);
}
ssize_t pwrite(int fd, const void* buf, size_t n, off_t offset) { return shim_pwrite("pwrite", fd, buf, n, offset); }
ssize_t pwrite64(int fd, const void* buf, size_t n, off_t offset) { return shim_pwrite("pwrite64", fd, buf, n, offset); }

static ssize_t shim_writev(const char* name, int fd, const struct iovec* iov, int count, off_t offset, int positioned) {
  if (fd_in_dir(fd) && is_kill_point()) {
    if (count > 0 && iov[0].iov_len > 1) {
      ssize_t (*real)(int, const void*, size_t, off_t) = REAL("pwrite", ssize_t (*)(int, const void*, size_t, off_t));
      ssize_t (*real_write)(int, const void*, size_t) = REAL("write", ssize_t (*)(int, const void*, size_t));
      if (positioned) real(fd, iov[0].iov_base, iov[0].iov_len / 2, offset);
      else real_write(fd, iov[0].iov_base, iov[0].iov_len / 2);
    }
    die();
  }
  if (positioned) return REAL(name, ssize_t (*)(int, const struct iovec*, int, off_t))(fd, iov, count, offset);
  return REAL(name, ssize_t (*)(int, const struct iovec*, int))(fd, iov, count);
}
ssize_t writev(int fd, const struct iovec* iov, int count) { return shim_writev("writev", fd, iov, count, 0, 0); }
ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) {
  return shim_writev("pwritev", fd, iov, count, offset, 1);
}

ssize_t copy_file_range(int in, loff_t* in_off, int out, loff_t* out_off, size_t n, unsigned flags) {
  if (fd_in_dir(out) && is_kill_point()) {
    /* Half the bytes, as a torn write (the kernel may copy in pieces too). */
    if (n > 1) REAL("copy_file_range", ssize_t (*)(int, loff_t*, int, loff_t*, size_t, unsigned))(in, in_off, out, out_off, n / 2, flags);
    die();
  }
  return REAL("copy_file_range", ssize_t (*)(int, loff_t*, int, loff_t*, size_t, unsigned))(in, in_off, out, out_off, n, flags);
}

#define FD_CALL(name, ret, params, args, fd)              \
  ret name params {                                        \
    if (fd_in_dir(fd) && is_kill_point()) die();           \
    return REAL(#name, ret(*) params) args;                \
  }
FD_CALL(fsync, int, (int fd), (fd), fd)
FD_CALL(fdatasync, int, (int fd), (fd), fd)
FD_CALL(ftruncate, int, (int fd, off_t length), (fd, length), fd)
FD_CALL(ftruncate64, int, (int fd, off_t length), (fd, length), fd)

#define PATH_CALL(name, ret, params, args, check)          \
  ret name params {                                        \
    if ((check) && is_kill_point()) die();                 \
    return REAL(#name, ret(*) params) args;                \
  }
PATH_CALL(rename, int, (const char* a, const char* b), (a, b), at_in_dir(AT_FDCWD, a) || at_in_dir(AT_FDCWD, b))
PATH_CALL(renameat, int, (int da, const char* a, int db, const char* b), (da, a, db, b),
          at_in_dir(da, a) || at_in_dir(db, b))
PATH_CALL(renameat2, int, (int da, const char* a, int db, const char* b, unsigned flags), (da, a, db, b, flags),
          at_in_dir(da, a) || at_in_dir(db, b))
PATH_CALL(link, int, (const char* a, const char* b), (a, b), at_in_dir(AT_FDCWD, b))
PATH_CALL(linkat, int, (int da, const char* a, int db, const char* b, int flags), (da, a, db, b, flags),
          at_in_dir(db, b))
PATH_CALL(unlink, int, (const char* a), (a), at_in_dir(AT_FDCWD, a))
PATH_CALL(unlinkat, int, (int d, const char* a, int flags), (d, a, flags), at_in_dir(d, a))
PATH_CALL(rmdir, int, (const char* a), (a), at_in_dir(AT_FDCWD, a))
PATH_CALL(mkdir, int, (const char* a, mode_t mode), (a, mode), at_in_dir(AT_FDCWD, a))
PATH_CALL(mkdirat, int, (int d, const char* a, mode_t mode), (d, a, mode), at_in_dir(d, a))

/* open with O_CREAT makes a file (or truncates one with O_TRUNC): a change of the folder. */
static int shim_openat(const char* name, int dirfd, const char* path, int flags, mode_t mode) {
  if ((flags & (O_CREAT | O_TRUNC)) != 0 && at_in_dir(dirfd, path) && is_kill_point()) die();
  if (strcmp(name, "open") == 0 || strcmp(name, "open64") == 0) {
    return REAL(name, int (*)(const char*, int, ...))(path, flags, mode);
  }
  return REAL(name, int (*)(int, const char*, int, ...))(dirfd, path, flags, mode);
}
#define OPEN_MODE(flags, mode)                    \
  mode_t mode = 0;                                \
  if ((flags) & (O_CREAT | __O_TMPFILE)) {        \
    va_list ap;                                   \
    va_start(ap, flags);                          \
    mode = va_arg(ap, mode_t);                    \
    va_end(ap);                                   \
  }
int open(const char* path, int flags, ...) {
  OPEN_MODE(flags, mode)
  return shim_openat("open", AT_FDCWD, path, flags, mode);
}
int open64(const char* path, int flags, ...) {
  OPEN_MODE(flags, mode)
  return shim_openat("open64", AT_FDCWD, path, flags, mode);
}
int openat(int dirfd, const char* path, int flags, ...) {
  OPEN_MODE(flags, mode)
  return shim_openat("openat", dirfd, path, flags, mode);
}
int openat64(int dirfd, const char* path, int flags, ...) {
  OPEN_MODE(flags, mode)
  return shim_openat("openat64", dirfd, path, flags, mode);
}
