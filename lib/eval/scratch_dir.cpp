// mkdtemp-made private folders, removed with core's remove_tree.
#include "eval/scratch_dir.h"

#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "core/remove_tree.h"

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

ScratchDir::~ScratchDir() { crl::remove_tree(path_); }


}  // namespace crl::eval
