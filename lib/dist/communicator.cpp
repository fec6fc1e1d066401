// The trainers' communicator: MPI on CPU tensors, NCCL on CUDA tensors (see communicator.h).
#include "dist/communicator.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/mpi_check.h"

#ifdef CRL_HAVE_NCCL
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "core/nccl_check.h"
#endif

namespace crl::dist {
namespace {

void require_contiguous(const torch::Tensor& tensor, const char* what) {
  if (!tensor.defined() || !tensor.is_contiguous()) {
    throw InputError(fmt::format("{}: the tensor must be defined and contiguous", what));
  }
}

MPI_Datatype mpi_type_of(const torch::Tensor& tensor, const char* what) {
  switch (tensor.scalar_type()) {
    case torch::kFloat32: return MPI_FLOAT;
    case torch::kFloat64: return MPI_DOUBLE;
    case torch::kInt64: return MPI_INT64_T;
    default:
      throw InputError(fmt::format("{}: MPI collectives take float32, float64 or int64 tensors, not {}", what,
                                   c10::toString(tensor.scalar_type())));
  }
}

class MpiPending final : public PendingCollective {
 public:
  explicit MpiPending(MPI_Request request) : request_(request) {}
  ~MpiPending() override {
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  void wait() override { CRL_MPI_CHECK(MPI_Wait(&request_, MPI_STATUS_IGNORE)); }

 private:
  MPI_Request request_;
};

class DonePending final : public PendingCollective {
 public:
  void wait() override {}
};

// The process's own duplicate of the caller's communicator, freed on destruction.
class OwnedComm {
 public:
  explicit OwnedComm(MPI_Comm comm) {
    CRL_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
    CRL_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    CRL_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    CRL_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  }
  ~OwnedComm() {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (!finalised && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  MPI_Comm get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  double all_reduce_scalar(double value) const {
    double sum = 0;
    CRL_MPI_CHECK(MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comm_));
    return sum;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  std::string backend() const override { return "mpi"; }

  std::unique_ptr<PendingCollective> all_reduce_sum(torch::Tensor& tensor) override {
    require_contiguous(tensor, "MPI all-reduce");
    if (!tensor.device().is_cpu()) throw InputError("MPI all-reduce: the tensor must be on the CPU");
    const MPI_Datatype type = mpi_type_of(tensor, "MPI all-reduce");
    MPI_Request request = MPI_REQUEST_NULL;
    CRL_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), static_cast<int>(tensor.numel()), type, MPI_SUM,
                                 comm_.get(), &request));
    return std::make_unique<MpiPending>(request);
  }

  std::unique_ptr<PendingCollective> broadcast(torch::Tensor& tensor, int root) override {
    require_contiguous(tensor, "MPI broadcast");
    if (!tensor.device().is_cpu()) throw InputError("MPI broadcast: the tensor must be on the CPU");
    // Bytes, so any dtype (bf16 weights too) broadcasts.
    MPI_Request request = MPI_REQUEST_NULL;
    CRL_MPI_CHECK(MPI_Ibcast(tensor.data_ptr(), static_cast<int>(tensor.nbytes()), MPI_BYTE, root, comm_.get(),
                             &request));
    return std::make_unique<MpiPending>(request);
  }

  double all_reduce_scalar(double value) override { return comm_.all_reduce_scalar(value); }

 private:
  OwnedComm comm_;
};

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "local"; }
  std::unique_ptr<PendingCollective> all_reduce_sum(torch::Tensor&) override { return std::make_unique<DonePending>(); }
  std::unique_ptr<PendingCollective> broadcast(torch::Tensor&, int) override { return std::make_unique<DonePending>(); }
  double all_reduce_scalar(double value) override { return value; }
};

#ifdef CRL_HAVE_NCCL
ncclDataType_t nccl_type_of(const torch::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case torch::kFloat32: return ncclFloat32;
    case torch::kFloat64: return ncclFloat64;
    case torch::kBFloat16: return ncclBfloat16;
    case torch::kFloat16: return ncclFloat16;
    case torch::kInt64: return ncclInt64;
    default:
      throw InputError(fmt::format("NCCL collective: unsupported dtype {}", c10::toString(tensor.scalar_type())));
  }
}

// The NCCL collective is done on the communicator's stream once this event is; wait() makes the
// caller's current stream wait for it (no CPU sync).
class NcclPending final : public PendingCollective {
 public:
  NcclPending(c10::cuda::CUDAStream stream, c10::DeviceIndex device) : device_(device) { done_.record(stream); }
  ~NcclPending() override {
    if (!waited_) {
      try {
        wait();
      } catch (...) {
      }
    }
  }
  void wait() override {
    c10::cuda::CUDAGuard guard(device_);
    done_.block(c10::cuda::getCurrentCUDAStream(device_));
    waited_ = true;
  }

 private:
  at::cuda::CUDAEvent done_;
  c10::DeviceIndex device_;
  bool waited_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm comm, torch::Device device)
      : comm_(comm), device_(device.has_index() ? device.index() : 0),
        stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device_)) {
    c10::cuda::CUDAGuard guard(device_);
    ncclUniqueId id;
    if (comm_.rank() == 0) CRL_NCCL_CHECK(ncclGetUniqueId(&id));
    CRL_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm_.get()));
    CRL_NCCL_CHECK(ncclCommInitRank(&nccl_, comm_.size(), id, comm_.rank()));
  }
  ~NcclCommunicator() override {
    if (nccl_ != nullptr) ncclCommDestroy(nccl_);
  }
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  std::string backend() const override { return "nccl"; }

  std::unique_ptr<PendingCollective> all_reduce_sum(torch::Tensor& tensor) override {
    prepare(tensor, "NCCL all-reduce");
    CRL_NCCL_CHECK(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                                 nccl_type_of(tensor), ncclSum, nccl_, stream_.stream()));
    return std::make_unique<NcclPending>(stream_, device_);
  }

  std::unique_ptr<PendingCollective> broadcast(torch::Tensor& tensor, int root) override {
    prepare(tensor, "NCCL broadcast");
    CRL_NCCL_CHECK(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.nbytes(), ncclUint8, root, nccl_,
                                 stream_.stream()));
    return std::make_unique<NcclPending>(stream_, device_);
  }

  double all_reduce_scalar(double value) override { return comm_.all_reduce_scalar(value); }

 private:
  // The collective must see everything queued on the caller's stream so far, and the caching
  // allocator must not reuse the tensor's memory before the collective's stream is done with it.
  void prepare(const torch::Tensor& tensor, const char* what) {
    require_contiguous(tensor, what);
    if (!tensor.is_cuda() || tensor.device().index() != device_) {
      throw InputError(fmt::format("{}: the tensor must be on cuda:{}", what, device_));
    }
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(device_));
    ready.block(stream_);
    c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), stream_);
  }

  OwnedComm comm_;
  c10::DeviceIndex device_;
  c10::cuda::CUDAStream stream_;
  ncclComm_t nccl_ = nullptr;
};
#endif

}  // namespace

std::unique_ptr<Communicator> make_communicator(MPI_Comm comm, torch::Device device) {
  if (device.is_cuda()) {
#ifdef CRL_HAVE_NCCL
    return std::make_unique<NcclCommunicator>(comm, device);
#else
    throw ApiError("NCCL", "make_communicator: CUDA tensors need NCCL, and this build of crl has none "
                           "(configure on a machine with nvcc and NCCL)");
#endif
  }
  return std::make_unique<MpiCommunicator>(comm);
}

std::unique_ptr<Communicator> make_local_communicator() { return std::make_unique<LocalCommunicator>(); }

}  // namespace crl::dist
