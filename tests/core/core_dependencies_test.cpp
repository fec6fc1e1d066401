// Tests that crl_core drags no MPI, HDF5, CUDA runtime or NCCL into what links it: this test
// program links crl::core alone, so none of their headers may be reachable and none of their
// libraries may be loaded (their check helpers live in dist, results and compile).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace crl {
namespace {

// CUDA's and NCCL's headers may sit in a default include folder (/usr/local/include), so only
// MPI's and HDF5's, which never do on Debian, are checked at compile time.
#if __has_include(<mpi.h>)
constexpr bool kMpiHeaderReachable = true;
#else
constexpr bool kMpiHeaderReachable = false;
#endif
#if __has_include(<hdf5.h>)
constexpr bool kHdf5HeaderReachable = true;
#else
constexpr bool kHdf5HeaderReachable = false;
#endif

TEST(CoreDependencies, NoMpiOrHdf5HeadersReachable) {
  EXPECT_FALSE(kMpiHeaderReachable) << "crl::core puts MPI's include folder on its users' path";
  EXPECT_FALSE(kHdf5HeaderReachable) << "crl::core puts HDF5's include folder on its users' path";
}

TEST(CoreDependencies, NoMpiHdf5CudaOrNcclLibraryLoaded) {
  // Something from core must be used, or the linker could drop it and the test prove nothing.
  EXPECT_THROW(throw_io_error("cannot open", "/nonexistent"), IoError);
  std::ifstream in("/proc/self/maps");  // not a regular file: read_file refuses it
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string maps = buf.str();
  ASSERT_FALSE(maps.empty());
  for (const char* lib : {"libmpi", "libhdf5", "libcudart", "libnccl"}) {
    EXPECT_EQ(maps.find(lib), std::string::npos) << "crl::core links " << lib;
  }
}

}  // namespace
}  // namespace crl
