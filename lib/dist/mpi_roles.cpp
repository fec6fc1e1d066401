// MPI start-up and role split (see mpi_roles.h).
#include "dist/mpi_roles.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "dist/mpi_check.h"

namespace crl::dist {

namespace {

std::atomic<bool> g_mpi_unusable{false};

int parse_local_rank(const char* name, const char* value) {
  const std::string text(value);
  size_t used = 0;
  int rank = -1;
  try {
    rank = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || rank < 0) {
    throw InputError(fmt::format("{}='{}' is not a non-negative integer (the launcher sets it: unset it, or "
                                 "start the job with srun or mpirun)", name, text));
  }
  return rank;
}

}  // namespace

std::string thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return fmt::format("thread level {}", level);
  }
}

void require_thread_level(int provided) {
  if (provided == MPI_THREAD_SERIALIZED || provided == MPI_THREAD_MULTIPLE) return;
  throw Error(fmt::format("MPI provides {}, but crl needs MPI_THREAD_SERIALIZED (gradient hooks call MPI from "
                          "autograd's thread): use an MPI built with thread support (Open MPI and MPICH are, by "
                          "default)", thread_level_name(provided)));
}

void mark_mpi_unusable(const std::string& reason) {
  if (!g_mpi_unusable.exchange(true)) spdlog::error("MPI is unusable from here on ({}): the job will be aborted", reason);
}

bool mpi_unusable() { return g_mpi_unusable.load(); }

void abort_job(const std::string& reason, int exit_code) {
  mark_mpi_unusable(reason);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialised = 0;
  CRL_MPI_CHECK(MPI_Initialized(&initialised));
  int provided = MPI_THREAD_SINGLE;
  if (!initialised) {
    CRL_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
    owns_ = true;
  } else {
    CRL_MPI_CHECK(MPI_Query_thread(&provided));
  }
  CRL_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CRL_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  CRL_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  try {
    require_thread_level(provided);
  } catch (...) {
    if (owns_) MPI_Finalize();
    throw;
  }
}

MpiSession::~MpiSession() {
  if (mpi_unusable()) {
    // A collective never finished: MPI_Finalize would wait for the peer that hangs. MPI_Abort ends
    // every rank with exit code 4 (crl's internal failure).
    MPI_Abort(MPI_COMM_WORLD, 4);
  }
  if (!owns_) return;
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_Finalize();
}

int local_rank_from(const char* ompi_local_rank, const char* slurm_localid, int shared_memory_rank) {
  if (ompi_local_rank != nullptr) return parse_local_rank("OMPI_COMM_WORLD_LOCAL_RANK", ompi_local_rank);
  if (slurm_localid != nullptr) return parse_local_rank("SLURM_LOCALID", slurm_localid);
  return shared_memory_rank;
}

int gpu_for_local_rank(int local_rank, int visible_devices) {
  if (visible_devices < 1) {
    throw InputError(fmt::format("local rank {} needs a GPU, but this process sees none (check "
                                 "CUDA_VISIBLE_DEVICES and the job's --gpus-per-task)", local_rank));
  }
  if (local_rank < 0) throw InputError(fmt::format("gpu_for_local_rank: local rank {} is negative", local_rank));
  return local_rank % visible_devices;
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
  roles.local_rank =
      local_rank_from(std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"), std::getenv("SLURM_LOCALID"), roles.local_rank);
  return roles;
}

}  // namespace crl::dist
