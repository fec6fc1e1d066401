// A private temporary folder (mkdtemp, mode 0700) removed with everything in it when dropped.
// Removal is core's remove_tree (see remove_tree.h for why std::filesystem::remove_all is safe in
// crl's LibTorch processes).
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

}  // namespace crl::eval
