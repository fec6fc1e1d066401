// MPI start-up and role split (see mpi_roles.h).
#include "dist/mpi_roles.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/mpi_check.h"

namespace crl::dist {

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialised = 0;
  CRL_MPI_CHECK(MPI_Initialized(&initialised));
  if (!initialised) {
    int provided = 0;
    CRL_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
    owns_ = true;
  }
  CRL_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CRL_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  CRL_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
}

MpiSession::~MpiSession() {
  if (!owns_) return;
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_Finalize();
}

void MpiRoles::release() {
  if (role_comm != MPI_COMM_NULL) MPI_Comm_free(&role_comm);
  role_comm = MPI_COMM_NULL;
}

MpiRoles split_roles(MPI_Comm world, int trainer_count) {
  MpiRoles roles;
  CRL_MPI_CHECK(MPI_Comm_rank(world, &roles.world_rank));
  CRL_MPI_CHECK(MPI_Comm_size(world, &roles.world_size));
  if (trainer_count < 1 || trainer_count > roles.world_size) {
    throw InputError(fmt::format("split_roles: {} trainers asked for, but the job has {} MPI ranks "
                                 "(need 1 <= trainers <= ranks)", trainer_count, roles.world_size));
  }
  roles.trainer_count = trainer_count;
  roles.role = roles.world_rank < trainer_count ? Role::kTrainer : Role::kEvaluator;
  CRL_MPI_CHECK(MPI_Comm_split(world, roles.is_trainer() ? 0 : 1, roles.world_rank, &roles.role_comm));
  CRL_MPI_CHECK(MPI_Comm_set_errhandler(roles.role_comm, MPI_ERRORS_RETURN));
  CRL_MPI_CHECK(MPI_Comm_rank(roles.role_comm, &roles.role_rank));
  CRL_MPI_CHECK(MPI_Comm_size(roles.role_comm, &roles.role_size));

  MPI_Comm node = MPI_COMM_NULL;
  CRL_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, roles.world_rank, MPI_INFO_NULL, &node));
  CRL_MPI_CHECK(MPI_Comm_rank(node, &roles.local_rank));
  CRL_MPI_CHECK(MPI_Comm_size(node, &roles.local_size));
  MPI_Comm_free(&node);
  if (const char* slurm_local = std::getenv("SLURM_LOCALID")) {
    try {
      roles.local_rank = std::stoi(slurm_local);
    } catch (const std::exception&) {
      throw InputError(fmt::format("split_roles: SLURM_LOCALID='{}' is not an integer", slurm_local));
    }
  }
  return roles;
}

}  // namespace crl::dist
