// A data-parallel SFT run for the dist tests, started by mpirun (or alone as a singleton):
//   dist_train_worker OUT_DIR GLOBAL_BATCH STEPS [cpu|cuda]
// Every rank starts from differently seeded weights (so the initial broadcast is exercised),
// takes its share of each global batch, trains through crl's Trainer (fp32) with the gradient
// reducer over MPI on the CPU, or over NCCL on GPU <local rank mod visible GPUs> with cuda, and writes
// OUT_DIR/rank-<r>.safetensors (final weights) and rank-<r>.json (stats).
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/mpi_roles.h"
#include "policy/config.h"
#include "policy/safetensors.h"
#include "rl/losses.h"
#include "rl/train_step.h"

int main(int argc, char** argv) {
  try {
    crl::dist::MpiSession mpi(&argc, &argv);
    if (argc != 4 && argc != 5) throw crl::InputError("usage: dist_train_worker OUT_DIR GLOBAL_BATCH STEPS [cpu|cuda]");
    const std::filesystem::path out_dir = argv[1];
    const int64_t global_batch = std::stoll(argv[2]);
    const int steps = std::stoi(argv[3]);
    const crl::dist::MpiRoles roles = crl::dist::split_roles(MPI_COMM_WORLD, mpi.size());
    if (global_batch % roles.role_size != 0) throw crl::InputError("GLOBAL_BATCH must divide by the rank count");
    const std::string device_kind = argc == 5 ? argv[4] : "cpu";
    if (device_kind != "cpu" && device_kind != "cuda") throw crl::InputError("device must be cpu or cuda");
    const torch::Device device =
        device_kind == "cuda"
            ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(crl::dist::gpu_for_local_rank(
                                              roles.local_rank, static_cast<int>(torch::cuda::device_count()))))
            : torch::Device(torch::kCPU);
    auto comm = crl::dist::make_communicator(roles.role_comm, device);

    crl::policy::CausalLm model(crl::policy::load_model_config(
        std::filesystem::path(CRL_TEST_DATA_DIR) / "policy" / "models" / "qwen2_gqa2_tied"));
    crl::policy::init_weights(model, 100 + static_cast<uint64_t>(roles.role_rank));
    model->to(device);
    crl::rl::TrainerOptions options;
    options.schedule = crl::rl::LrSchedule{3e-3, 1, steps, 0.1};
    options.adamw.weight_decay = 0.01;
    options.activation_checkpointing = true;
    options.reducer.bucket_bytes = 64 * 1024;  // several buckets, launched during backward
    crl::rl::Trainer trainer(model, options, *comm);

    const int64_t local_batch = global_batch / roles.role_size;
    const int64_t seq = 12;
    nlohmann::json stats = nlohmann::json::array();
    for (int step = 0; step < steps; ++step) {
      // The same global batch on every rank (seeded by step); each rank takes its rows. Completion
      // lengths differ per row, so ranks hold different token counts (global normalisation matters).
      torch::manual_seed(1000 + step);
      const torch::Tensor ids = torch::randint(0, 320, {global_batch, seq}, torch::kInt64);
      torch::Tensor loss_mask = torch::zeros({global_batch, seq}, torch::kInt64);
      for (int64_t r = 0; r < global_batch; ++r) loss_mask.index_put_({r, torch::indexing::Slice(2 + (r * 3) % 8, seq)}, 1);
      const auto rows = torch::indexing::Slice(roles.role_rank * local_batch, (roles.role_rank + 1) * local_batch);
      crl::rl::MicroBatch mb{ids.index({rows}).to(device), torch::Tensor(), loss_mask.index({rows}).to(device)};
      const std::vector<crl::rl::MicroBatch> mbs{mb};
      const auto result = trainer.step(mbs, [&](const torch::Tensor& logits, size_t) {
        return crl::rl::sft_loss(logits, mb.input_ids, mb.loss_mask).sum;
      });
      stats.push_back({{"loss", result.loss}, {"tokens", result.tokens}, {"grad_norm", result.grad_norm},
                       {"buckets", trainer.reducer().bucket_count()},
                       {"buckets_during_backward", trainer.reducer().buckets_launched_during_backward()}});
    }
    const std::string name = "rank-" + std::to_string(roles.role_rank);
    crl::policy::write_safetensors(out_dir / (name + ".safetensors"), crl::policy::state_tensors(model));
    std::ofstream(out_dir / (name + ".json")) << nlohmann::json{{"backend", comm->backend()}, {"steps", stats}}.dump(2);
    comm.reset();
    crl::dist::MpiRoles(roles).release();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "dist_train_worker: " << e.what() << "\n";
    return 1;
  }
}
