// remove_tree: std::filesystem::remove_all with errors ignored; see remove_tree.h.
#include "core/remove_tree.h"

#include <system_error>

namespace crl {

uintmax_t remove_tree(const std::filesystem::path& path) {
  std::error_code ignored;
  const uintmax_t removed = std::filesystem::remove_all(path, ignored);
  return removed == static_cast<uintmax_t>(-1) ? 0 : removed;
}

}  // namespace crl
