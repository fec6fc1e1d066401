// mkdtemp-made private folders and their nftw-based removal.
#include "eval/scratch_dir.h"

#include <ftw.h>
#include <stdio.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "core/error.h"

namespace crl::eval {

ScratchDir::ScratchDir(const std::string& prefix, const std::string& parent) {
  std::string base = parent;
  if (base.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    base = tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp";
  }
  std::string pattern = base + "/" + prefix + "XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) throw_io_error("cannot create a private folder", pattern);
  path_ = buffer.data();
}

ScratchDir::~ScratchDir() { remove_tree(path_); }

void remove_tree(const std::string& path) {
  if (path.empty() || path == "/") return;
  nftw(
      path.c_str(),
      [](const char* file, const struct stat*, int, struct FTW*) { return ::remove(file) == 0 ? 0 : 0; }, 32,
      FTW_DEPTH | FTW_PHYS);
}

}  // namespace crl::eval
