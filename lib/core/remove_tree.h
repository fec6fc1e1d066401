// The one recursive delete of crl (rm -rf, best effort).
#pragma once

#include <cstdint>
#include <filesystem>

namespace crl {

// Removes `path` and everything under it, without following symbolic links; a missing path is
// fine and errors are ignored (the callers clean up scratch space). Returns the number of files
// and directories removed.
//
// It is std::filesystem::remove_all. The PyPI LibTorch wheel exports std::filesystem symbols of its
// own; crl once crashed in remove_all when a binary bound some of those symbols to libtorch.so and
// others to libstdc++. cmake/CrlDependencies.cmake links libstdc++ before LibTorch, so every crl
// binary binds all of them to libstdc++, and TorchLinkTest.StdFilesystemRemoveAllWorks (in a
// binary linking LibTorch) keeps that true. A probe binding every one to libtorch.so works too.
uintmax_t remove_tree(const std::filesystem::path& path);

}  // namespace crl
