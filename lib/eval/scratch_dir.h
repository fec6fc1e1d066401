// A private temporary folder (mkdtemp, mode 0700) removed with everything in it when dropped.
// Removal uses nftw, not std::filesystem::remove_all: libtorch.so exports its own copy of the
// std::filesystem symbols, and in a process that links it that remove_all crashes (null call).
#pragma once

#include <string>

namespace crl::eval {

class ScratchDir {
 public:
  // Creates <parent>/<prefix>XXXXXX; parent "" means $TMPDIR or /tmp. Throws IoError on failure.
  explicit ScratchDir(const std::string& prefix, const std::string& parent = "");
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Removes `path` and everything under it, not following symlinks; a missing path is fine.
void remove_tree(const std::string& path);

}  // namespace crl::eval
