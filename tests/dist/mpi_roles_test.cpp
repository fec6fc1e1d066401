// Tests of the rank-placement logic without MPI: which GPU a local rank takes, where the local
// rank comes from, the thread level crl accepts, and how messages list a rank's peers.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/mpi_roles.h"

namespace crl::dist {
namespace {

TEST(GpuForLocalRank, LocalRankModuloTheVisibleDevices) {
  // All of a node's 8 GPUs visible: rank i takes GPU i, and wraps past the last.
  EXPECT_EQ(gpu_for_local_rank(0, 8), 0);
  EXPECT_EQ(gpu_for_local_rank(5, 8), 5);
  EXPECT_EQ(gpu_for_local_rank(9, 8), 1);
  // --gpus-per-task=1: each rank sees one device, whatever its local rank.
  for (int local = 0; local < 4; ++local) EXPECT_EQ(gpu_for_local_rank(local, 1), 0) << local;
  // Two GPUs per task for a node of 4 ranks.
  EXPECT_EQ(gpu_for_local_rank(3, 2), 1);
  EXPECT_THROW(gpu_for_local_rank(0, 0), InputError);
  EXPECT_THROW(gpu_for_local_rank(-1, 2), InputError);
}

TEST(LocalRankFrom, OpenMpiThenSlurmThenTheSharedMemorySplit) {
  EXPECT_EQ(local_rank_from("3", "0", 7), 3);  // mpirun inside sbatch: the script's SLURM_LOCALID is stale
  EXPECT_EQ(local_rank_from(nullptr, "2", 7), 2);
  EXPECT_EQ(local_rank_from(nullptr, nullptr, 7), 7);
  for (const char* bad : {"", "x", "-1", "2a"}) {
    try {
      local_rank_from(bad, nullptr, 0);
      ADD_FAILURE() << "accepted OMPI_COMM_WORLD_LOCAL_RANK='" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("OMPI_COMM_WORLD_LOCAL_RANK"), std::string::npos) << e.what();
    }
    EXPECT_THROW(local_rank_from(nullptr, bad, 0), InputError) << bad;
  }
}

TEST(RequireThreadLevel, SerializedOrMultipleOnly) {
  EXPECT_NO_THROW(require_thread_level(MPI_THREAD_SERIALIZED));
  EXPECT_NO_THROW(require_thread_level(MPI_THREAD_MULTIPLE));
  EXPECT_THROW(require_thread_level(MPI_THREAD_SINGLE), Error);
  try {
    require_thread_level(MPI_THREAD_FUNNELED);
    ADD_FAILURE() << "FUNNELED accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MPI provides MPI_THREAD_FUNNELED"), std::string::npos) << e.what();
  }
}

TEST(PeerRanks, ListsTheOtherRanksAsRanges) {
  EXPECT_EQ(peer_ranks(0, 2), "1");
  EXPECT_EQ(peer_ranks(1, 2), "0");
  EXPECT_EQ(peer_ranks(1, 4), "0, 2-3");
  EXPECT_EQ(peer_ranks(3, 4), "0-2");
  EXPECT_EQ(peer_ranks(0, 1), "none");
}

}  // namespace
}  // namespace crl::dist
