// For the dist tests: a peer that never joins a collective, started by mpirun on 2 ranks:
//   collective_timeout_worker all-reduce|scalar TIMEOUT_MS [cpu|cuda]
// Both ranks build a communicator (MPI on cpu, NCCL on cuda) with the given collective timeout;
// rank 0 then joins one collective (a tensor all-reduce, or the scalar all-reduce), rank 1 sleeps
// 120 s instead. Rank 0 must fail with CollectiveError within the timeout, print its message and
// exit; its MpiSession then aborts the job (which ends rank 1 too).
#include <torch/torch.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/mpi_roles.h"

int main(int argc, char** argv) {
  crl::dist::MpiSession mpi(&argc, &argv);  // outside the try: it must outlive the error report
  try {
    if (argc != 3 && argc != 4) {
      throw crl::InputError("usage: collective_timeout_worker all-reduce|scalar TIMEOUT_MS [cpu|cuda]");
    }
    const std::string mode = argv[1];
    if (mode != "all-reduce" && mode != "scalar") throw crl::InputError("mode must be all-reduce or scalar");
    const std::string device_kind = argc == 4 ? argv[3] : "cpu";
    if (device_kind != "cpu" && device_kind != "cuda") throw crl::InputError("device must be cpu or cuda");
    crl::dist::CommunicatorOptions options;
    options.collective_timeout = std::chrono::milliseconds(std::stoll(argv[2]));
    const crl::dist::MpiRoles roles = crl::dist::split_roles(MPI_COMM_WORLD, mpi.size());
    const torch::Device device =
        device_kind == "cuda"
            ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(crl::dist::gpu_for_local_rank(
                                              roles.local_rank, static_cast<int>(torch::cuda::device_count()))))
            : torch::Device(torch::kCPU);
    auto comm = crl::dist::make_communicator(MPI_COMM_WORLD, device, options);
    if (comm->rank() != 0) {
      std::this_thread::sleep_for(std::chrono::seconds(120));
      return 0;
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      if (mode == "all-reduce") {
        torch::Tensor t = torch::ones({1024}, device);
        comm->all_reduce_sum(t)->wait();  // MPI: throws here
        // NCCL: wait() queued the wait on the GPU. This read returns once the watchdog has aborted
        // the collective, and the next call on the communicator throws the watchdog's error.
        (void)t.sum().item<float>();
        comm->all_reduce_scalar(1.0);
      } else {
        comm->all_reduce_scalar(1.0);
      }
    } catch (const crl::dist::CollectiveError& e) {
      const double waited = crl::seconds_since(start);
      std::cerr << "collective_timeout_worker: CollectiveError after " << waited << " s: " << e.what() << std::endl;
      return 1;
    }
    std::cerr << "collective_timeout_worker: the collective finished without its peer" << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "collective_timeout_worker: " << e.what() << std::endl;
    return 3;
  }
}
