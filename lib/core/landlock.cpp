// Landlock rulesets built from folder lists, and their application (see landlock.h).
#include "core/landlock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/error.h"

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

}  // namespace crl
