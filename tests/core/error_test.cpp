// Tests of crl's typed errors and of the launch place (rank, host) they name.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>

#include "core/error.h"
#include "core/process_env.h"

namespace crl {
namespace {

TEST(ProcessEnv, ReadsRankFromOpenMpiVariables) {
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  const auto p = launch_place();
  EXPECT_EQ(p.launcher, "mpirun");
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.size, 8);
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_NE(process_location().find("rank 3"), std::string::npos);
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(launch_place().rank, -1);
  EXPECT_EQ(process_location().find("rank"), std::string::npos);
}

TEST(ProcessEnv, SrunNeedsAStepId) {
  setenv("SLURM_PROCID", "0", 1);  // set inside a batch script even without srun
  EXPECT_EQ(launch_place().launcher, "");
  setenv("SLURM_STEP_ID", "2", 1);
  setenv("SLURM_NTASKS", "4", 1);
  EXPECT_EQ(launch_place().launcher, "srun");
  EXPECT_EQ(launch_place().size, 4);
  unsetenv("SLURM_PROCID");
  unsetenv("SLURM_STEP_ID");
  unsetenv("SLURM_NTASKS");
}

TEST(Errors, IoErrorNamesPathAndReason) {
  errno = ENOENT;
  try {
    throw_io_error("cannot open", "/tmp/x.yaml");
  } catch (const IoError& e) {
    EXPECT_STREQ(e.what(), "cannot open '/tmp/x.yaml': No such file or directory");
    EXPECT_EQ(e.error_number(), ENOENT);  // kept: main() tells a wrong path from a failing machine by it
  }
}

TEST(Errors, PathErrorsAreTheOnesAUserFixes) {
  for (int err : {ENOENT, ENOTDIR, EISDIR, ELOOP, EACCES, EEXIST}) EXPECT_TRUE(is_path_error(err)) << err;
  for (int err : {0, EIO, ENOSPC, ENOMEM, EINTR}) EXPECT_FALSE(is_path_error(err)) << err;
}

}  // namespace
}  // namespace crl
