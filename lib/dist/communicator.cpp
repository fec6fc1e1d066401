// The trainers' communicator: MPI on CPU tensors, NCCL on CUDA tensors (see communicator.h).
#include "dist/communicator.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "dist/mpi_check.h"
#include "dist/mpi_roles.h"

#ifdef CRL_HAVE_NCCL
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "dist/nccl_check.h"
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

using Clock = std::chrono::steady_clock;

double seconds(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }

// What a bounded wait says when its deadline passes: the collective, this rank, its peers.
std::string timeout_message(const std::string& what, std::chrono::milliseconds timeout, int rank, int size) {
  return fmt::format("{} did not finish within {:g} s on rank {} of {} ({}; peers: rank{} {}): a peer died, hangs "
                     "or never reached this collective", what, seconds(timeout), rank, size, process_location(),
                     size > 2 ? "s" : "", peer_ranks(rank, size));
}

// The process's own duplicate of the caller's communicator, freed on destruction, and the bounded
// wait every MPI request of it goes through.
class OwnedComm {
 public:
  OwnedComm(MPI_Comm comm, std::chrono::milliseconds timeout) : timeout_(timeout) {
    CRL_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
    CRL_MPI_CHECK(MPI_Comm_size(comm, &size_));
    MPI_Request request = MPI_REQUEST_NULL;
    CRL_MPI_CHECK(MPI_Comm_idup(comm, &comm_, &request));
    wait(request, "MPI communicator duplication");
    CRL_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  }
  ~OwnedComm() {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (!finalised && comm_ != MPI_COMM_NULL && !mpi_unusable()) MPI_Comm_free(&comm_);
  }
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  MPI_Comm get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Completes `request` or throws CollectiveError once the timeout has passed (MPI cannot cancel a
  // collective: the request is abandoned, and MPI marked unusable). MPI_Test drives MPI's progress,
  // so the loop tests back to back for a while (a large all-reduce needs many calls), then sleeps
  // a millisecond between tests.
  void wait(MPI_Request& request, const std::string& what) const {
    if (mpi_unusable() && request != MPI_REQUEST_NULL) {
      // An earlier collective failed: waiting for this one too would only add timeouts (the
      // gradient reducer's other buckets, waited for as they are destroyed).
      request = MPI_REQUEST_NULL;
      throw CollectiveError(fmt::format("{} on rank {} of {} was abandoned: an earlier collective failed", what,
                                        rank_, size_));
    }
    const Clock::time_point start = Clock::now(), deadline = start + timeout_;
    const Clock::time_point spin_until = start + std::chrono::milliseconds(20);
    for (;;) {
      int done = 0;
      CRL_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (done) return;
      const Clock::time_point now = Clock::now();
      if (now >= deadline) {
        request = MPI_REQUEST_NULL;  // abandoned: freeing an active collective's request is erroneous
        const std::string message = timeout_message(what, timeout_, rank_, size_);
        mark_mpi_unusable(message);
        throw CollectiveError(message);
      }
      if (now < spin_until) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }

  double all_reduce_scalar(double value) const {
    double sum = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    CRL_MPI_CHECK(MPI_Iallreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comm_, &request));
    wait(request, "MPI scalar all-reduce");
    return sum;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::chrono::milliseconds timeout_;
};

class MpiPending final : public PendingCollective {
 public:
  MpiPending(MPI_Request request, const OwnedComm& comm, std::string what)
      : request_(request), comm_(comm), what_(std::move(what)) {}
  ~MpiPending() override {
    if (request_ == MPI_REQUEST_NULL) return;
    try {
      comm_.wait(request_, what_);
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
    }
  }
  void wait() override { comm_.wait(request_, what_); }

 private:
  MPI_Request request_;
  const OwnedComm& comm_;
  std::string what_;
};

class DonePending final : public PendingCollective {
 public:
  void wait() override {}
};

std::string describe(const char* collective, int64_t number, const torch::Tensor& tensor) {
  return fmt::format("{} #{} ({} {} elements)", collective, number, tensor.numel(), c10::toString(tensor.scalar_type()));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, const CommunicatorOptions& options) : comm_(comm, options.collective_timeout) {}
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
    return std::make_unique<MpiPending>(request, comm_, describe("MPI all-reduce", ++collectives_, tensor));
  }

  std::unique_ptr<PendingCollective> broadcast(torch::Tensor& tensor, int root) override {
    require_contiguous(tensor, "MPI broadcast");
    if (!tensor.device().is_cpu()) throw InputError("MPI broadcast: the tensor must be on the CPU");
    // Bytes, so any dtype (bf16 weights too) broadcasts.
    MPI_Request request = MPI_REQUEST_NULL;
    CRL_MPI_CHECK(MPI_Ibcast(tensor.data_ptr(), static_cast<int>(tensor.nbytes()), MPI_BYTE, root, comm_.get(),
                             &request));
    return std::make_unique<MpiPending>(request, comm_, describe("MPI broadcast", ++collectives_, tensor));
  }

  double all_reduce_scalar(double value) override { return comm_.all_reduce_scalar(value); }

 private:
  OwnedComm comm_;
  int64_t collectives_ = 0;
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

// Watches a NCCL communicator's collectives from a thread of its own: each one's completion event,
// and NCCL's asynchronous error. A collective older than the timeout, or an error, aborts the
// communicator (ncclCommAbort: the collective's kernels return, so the GPU work queued after them
// drains instead of hanging) and records a message that the communicator's next call throws.
class NcclWatchdog {
 public:
  NcclWatchdog(ncclComm_t comm, c10::DeviceIndex device, int rank, int size, std::chrono::milliseconds timeout)
      : comm_(comm), device_(device), rank_(rank), size_(size), timeout_(timeout), thread_([this] { run(); }) {}
  ~NcclWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  // A collective just queued; `done` is recorded on the communicator's stream after it.
  void watch(std::shared_ptr<at::cuda::CUDAEvent> done, std::string what) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_flight_.push_back({std::move(done), std::move(what), Clock::now()});
    }
    wake_.notify_all();
  }

  // Throws CollectiveError when the watchdog has aborted the communicator.
  void check() const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) throw CollectiveError(failure_);
  }
  bool aborted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return aborted_;
  }

 private:
  struct InFlight {
    std::shared_ptr<at::cuda::CUDAEvent> done;
    std::string what;
    Clock::time_point launched;
  };

  void run() {
    c10::cuda::CUDAGuard guard(device_);
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      // Idle: sleep until a collective comes. Busy: look every 50 ms (a timeout needs no finer grain).
      if (in_flight_.empty()) {
        wake_.wait(lock, [this] { return stop_ || !in_flight_.empty(); });
      } else {
        wake_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stop_; });
      }
      if (stop_) return;
      // Finished collectives complete in stream order: drop them from the front.
      while (!in_flight_.empty() && in_flight_.front().done->query()) in_flight_.pop_front();
      if (in_flight_.empty()) continue;
      ncclResult_t async_error = ncclSuccess;
      const ncclResult_t queried = ncclCommGetAsyncError(comm_, &async_error);
      std::string failure;
      if (queried != ncclSuccess || (async_error != ncclSuccess && async_error != ncclInProgress)) {
        failure = fmt::format("NCCL reported an asynchronous error during {} on rank {} of {} ({}; peers: rank{} {}): {}",
                              in_flight_.front().what, rank_, size_, process_location(), size_ > 2 ? "s" : "",
                              peer_ranks(rank_, size_), ncclGetErrorString(queried != ncclSuccess ? queried : async_error));
      } else if (Clock::now() - in_flight_.front().launched > timeout_) {
        failure = "NCCL " + timeout_message(in_flight_.front().what, timeout_, rank_, size_);
      }
      if (failure.empty()) continue;
      failure += "; the NCCL communicator was aborted";
      spdlog::error("{}", failure);
      mark_mpi_unusable(failure);
      ncclCommAbort(comm_);
      failure_ = failure;
      aborted_ = true;
      in_flight_.clear();
      return;
    }
  }

  ncclComm_t comm_;
  c10::DeviceIndex device_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<InFlight> in_flight_;
  bool stop_ = false, aborted_ = false;
  std::string failure_;
  std::thread thread_;  // last: starts once everything it reads exists
};

// The NCCL collective is done on the communicator's stream once this event is; wait() makes the
// caller's current stream wait for it (no CPU sync) after checking that the watchdog has not
// aborted the communicator.
class NcclPending final : public PendingCollective {
 public:
  NcclPending(std::shared_ptr<at::cuda::CUDAEvent> done, c10::DeviceIndex device, const NcclWatchdog& watchdog)
      : done_(std::move(done)), device_(device), watchdog_(watchdog) {}
  ~NcclPending() override {
    if (!waited_) {
      try {
        wait();
      } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
      }
    }
  }
  void wait() override {
    waited_ = true;
    watchdog_.check();
    c10::cuda::CUDAGuard guard(device_);
    done_->block(c10::cuda::getCurrentCUDAStream(device_));
  }

 private:
  std::shared_ptr<at::cuda::CUDAEvent> done_;
  c10::DeviceIndex device_;
  const NcclWatchdog& watchdog_;
  bool waited_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm comm, torch::Device device, const CommunicatorOptions& options)
      : comm_(comm, options.collective_timeout), device_(device.has_index() ? device.index() : 0),
        stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device_)) {
    c10::cuda::CUDAGuard guard(device_);
    ncclUniqueId id;
    if (comm_.rank() == 0) CRL_NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Request request = MPI_REQUEST_NULL;
    CRL_MPI_CHECK(MPI_Ibcast(&id, sizeof(id), MPI_BYTE, 0, comm_.get(), &request));
    comm_.wait(request, "NCCL set-up (broadcast of the ncclUniqueId)");
    // Every rank has arrived before ncclCommInitRank, which blocks without a deadline.
    comm_.all_reduce_scalar(1.0);
    CRL_NCCL_CHECK(ncclCommInitRank(&nccl_, comm_.size(), id, comm_.rank()));
    watchdog_ = std::make_unique<NcclWatchdog>(nccl_, device_, comm_.rank(), comm_.size(), options.collective_timeout);
  }
  ~NcclCommunicator() override {
    const bool aborted = watchdog_->aborted();
    watchdog_.reset();
    if (nccl_ != nullptr && !aborted) ncclCommDestroy(nccl_);  // an aborted communicator is freed already
  }
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  std::string backend() const override { return "nccl"; }

  std::unique_ptr<PendingCollective> all_reduce_sum(torch::Tensor& tensor) override {
    prepare(tensor, "NCCL all-reduce");
    CRL_NCCL_CHECK(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                                 nccl_type_of(tensor), ncclSum, nccl_, stream_.stream()));
    return launched(describe("all-reduce", ++collectives_, tensor));
  }

  std::unique_ptr<PendingCollective> broadcast(torch::Tensor& tensor, int root) override {
    prepare(tensor, "NCCL broadcast");
    CRL_NCCL_CHECK(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.nbytes(), ncclUint8, root, nccl_,
                                 stream_.stream()));
    return launched(describe("broadcast", ++collectives_, tensor));
  }

  double all_reduce_scalar(double value) override {
    watchdog_->check();
    return comm_.all_reduce_scalar(value);
  }

 private:
  // The collective must see everything queued on the caller's stream so far, and the caching
  // allocator must not reuse the tensor's memory before the collective's stream is done with it.
  void prepare(const torch::Tensor& tensor, const char* what) {
    watchdog_->check();
    require_contiguous(tensor, what);
    if (!tensor.is_cuda() || tensor.device().index() != device_) {
      throw InputError(fmt::format("{}: the tensor must be on cuda:{}", what, device_));
    }
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(device_));
    ready.block(stream_);
    c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), stream_);
  }

  std::unique_ptr<PendingCollective> launched(std::string what) {
    auto done = std::make_shared<at::cuda::CUDAEvent>();
    done->record(stream_);
    watchdog_->watch(done, std::move(what));
    return std::make_unique<NcclPending>(std::move(done), device_, *watchdog_);
  }

  OwnedComm comm_;
  c10::DeviceIndex device_;
  c10::cuda::CUDAStream stream_;
  ncclComm_t nccl_ = nullptr;
  std::unique_ptr<NcclWatchdog> watchdog_;
  int64_t collectives_ = 0;
};
#endif

}  // namespace

void CommunicatorOptions::validate() const {
  if (collective_timeout.count() <= 0) {
    throw InputError(fmt::format("communicator: collective_timeout must be positive (got {} ms)", collective_timeout.count()));
  }
}

std::string peer_ranks(int rank, int size) {
  std::string out;
  const auto add_range = [&](int first, int last) {
    if (first > last) return;
    if (!out.empty()) out += ", ";
    out += first == last ? std::to_string(first) : fmt::format("{}-{}", first, last);
  };
  add_range(0, rank - 1);
  add_range(rank + 1, size - 1);
  return out.empty() ? "none" : out;
}

std::unique_ptr<Communicator> make_communicator(MPI_Comm comm, torch::Device device, CommunicatorOptions options) {
  options.validate();
  if (device.is_cuda()) {
#ifdef CRL_HAVE_NCCL
    return std::make_unique<NcclCommunicator>(comm, device, options);
#else
    throw ApiError("NCCL", "make_communicator: CUDA tensors need NCCL, and this build of crl has none "
                           "(configure on a machine with nvcc and NCCL)");
#endif
  }
  return std::make_unique<MpiCommunicator>(comm, options);
}

std::unique_ptr<Communicator> make_local_communicator() { return std::make_unique<LocalCommunicator>(); }

}  // namespace crl::dist
