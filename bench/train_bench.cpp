// Training throughput and gradient all-reduce bandwidth.
//
// BM_TrainStep/full, /lora: tokens per second per GPU of crl's Trainer (bf16 compute, fp32
// master AdamW, grad clipping, SFT loss on every token) on a Qwen2-0.5B-shaped model (hidden
// 896, 24 layers, 14 heads, 2 kv heads, intermediate 4864, vocab 151936, tied) at batch 8 x 1024;
// compare with tools/bench/hf_train_step.py on the same machine. Without a GPU it runs a tiny
// model on the CPU (a check that the path works, not a figure).
// BM_GradAllReduce vs BM_RawAllReduce (under mpirun, 2+ ranks): bus bandwidth of the reducer's
// bucketed all-reduce of the model's fp32 gradients against one all-reduce of the same bytes.
//
// Env: CRL_BENCH_BATCH (8), CRL_BENCH_SEQ (1024), CRL_BENCH_CHECKPOINTING (0), CRL_BENCH_MODEL
// (qwen2-0.5b, or qwen2-1.5b: hidden 1536, 28 layers, 12 heads, 2 kv heads, intermediate 8960,
// the "1.5B model on one H200 with long completions" with CRL_BENCH_CHECKPOINTING=1).
// On a GPU the peak of the caching allocator is reported (peak_allocated_GiB).
// CRL_BENCH_PROFILE=N: after timing, N more steps run under the Kineto profiler and the GPU kernels'
// time per step, summed by kernel name, is printed to stderr (compare with hf_train_step.py --profile).
// Run (one GPU):  build-gpu/bench/bench_train --benchmark_filter=TrainStep --benchmark_out=$OUT/train.json
// Run (2 GPUs):   mpirun -np 2 build-gpu/bench/bench_train --benchmark_filter=AllReduce --benchmark_out=$OUT/ar.json
#include <ATen/DeviceAccelerator.h>
#include <benchmark/benchmark.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernel_profile.h"
#include "dist/communicator.h"
#include "dist/gradient_reducer.h"
#include "dist/mpi_roles.h"
#include "rl/losses.h"
#include "rl/train_step.h"

namespace {

using namespace crl;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

bool on_gpu() { return torch::cuda::is_available(); }

torch::Device bench_device(int local_rank) {
  return on_gpu() ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(dist::gpu_for_local_rank(
                                                   local_rank, static_cast<int>(torch::cuda::device_count()))))
                  : torch::Device(torch::kCPU);
}

// CRL_BENCH_MODEL, checked: qwen2-0.5b (default) or qwen2-1.5b.
std::string bench_model_shape() {
  const char* model = std::getenv("CRL_BENCH_MODEL");
  const std::string shape = model != nullptr && *model != '\0' ? model : "qwen2-0.5b";
  if (shape != "qwen2-0.5b" && shape != "qwen2-1.5b") {
    throw std::invalid_argument("CRL_BENCH_MODEL must be qwen2-0.5b or qwen2-1.5b, not " + shape);
  }
  return shape;
}

policy::ModelConfig bench_config() {
  policy::ModelConfig c;
  c.model_type = "qwen2";
  c.architectures = {"Qwen2ForCausalLM"};
  const std::string shape = bench_model_shape();
  if (on_gpu() && shape == "qwen2-1.5b") {
    c.vocab_size = 151936, c.hidden_size = 1536, c.intermediate_size = 8960, c.num_hidden_layers = 28;
    c.num_attention_heads = 12, c.num_key_value_heads = 2;
  } else if (on_gpu()) {
    c.vocab_size = 151936, c.hidden_size = 896, c.intermediate_size = 4864, c.num_hidden_layers = 24;
    c.num_attention_heads = 14, c.num_key_value_heads = 2;
  } else {
    c.vocab_size = 512, c.hidden_size = 64, c.intermediate_size = 128, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2;
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  c.tie_word_embeddings = true;
  c.attention_bias = true;
  c.rope.theta = 1000000.0;
  c.validate("bench");
  return c;
}

int g_local_rank = 0;


void BM_TrainStep(benchmark::State& state, bool use_lora) {
  const torch::Device device = bench_device(g_local_rank);
  const int64_t batch = on_gpu() ? env_int("CRL_BENCH_BATCH", 8) : 2;
  const int64_t seq = on_gpu() ? env_int("CRL_BENCH_SEQ", 1024) : 32;
  policy::CausalLm model(bench_config());
  policy::init_weights(model, 1);
  model->to(device, on_gpu() ? torch::kBFloat16 : torch::kFloat32);
  std::unique_ptr<policy::LoraAdapters> lora;
  if (use_lora) lora = std::make_unique<policy::LoraAdapters>(model, policy::LoraConfig{}, 2);
  auto comm = dist::make_local_communicator();
  rl::TrainerOptions options;
  options.schedule = rl::LrSchedule{1e-5, 0, 1000000, 0.1};
  options.activation_checkpointing = env_int("CRL_BENCH_CHECKPOINTING", 0) != 0;
  rl::Trainer trainer(model, options, *comm, lora.get());
  const torch::Tensor ids =
      torch::randint(0, model->config().vocab_size, {batch, seq}, torch::TensorOptions().dtype(torch::kInt64).device(device));
  const torch::Tensor mask = torch::ones_like(ids);
  const std::vector<rl::MicroBatch> mbs{{ids, torch::Tensor(), mask}};
  const auto loss = [&](const torch::Tensor& logits, size_t) { return rl::sft_loss(logits, ids, mask).sum; };
  for (int i = 0; i < 2; ++i) trainer.step(mbs, loss);  // warm-up: allocator, kernels
  if (on_gpu()) {
    torch::cuda::synchronize();
    at::accelerator::resetPeakStats(device.index());
  }
  for (auto _ : state) {
    trainer.step(mbs, loss);  // ends with .item() reads: synchronised
    if (on_gpu()) torch::cuda::synchronize();
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(batch * seq), benchmark::Counter::kIsIterationInvariantRate);
  // Once per variant: Google Benchmark calls this function again while it settles the iteration count.
  static bool profiled[2] = {false, false};
  if (const int profile_steps = env_int("CRL_BENCH_PROFILE", 0); on_gpu() && profile_steps > 0 && !profiled[use_lora]) {
    profiled[use_lora] = true;
    crl::bench::print_kernel_profile(profile_steps, [&] { trainer.step(mbs, loss); });
  }
  if (on_gpu()) {
    const auto stats = at::accelerator::getDeviceStats(device.index());
    state.counters["peak_allocated_GiB"] = static_cast<double>(stats.allocated_bytes[0].peak) / (1 << 30);
  }
  state.counters["batch"] = static_cast<double>(batch);
  state.counters["seq"] = static_cast<double>(seq);
  state.SetLabel((on_gpu() ? "cuda bf16 " + bench_model_shape() : std::string("cpu fp32 tiny (path check only)")) +
                 (options.activation_checkpointing ? " checkpointing" : ""));
}
BENCHMARK_CAPTURE(BM_TrainStep, full, false)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(5.0);
BENCHMARK_CAPTURE(BM_TrainStep, lora, true)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(5.0);

// The model's parameters (fp32 gradient buckets of their size) and a communicator over all ranks.
struct AllReduceSetup {
  policy::CausalLm model{nullptr};
  std::unique_ptr<dist::Communicator> comm;
  int64_t elements = 0;
};

AllReduceSetup make_all_reduce_setup() {
  AllReduceSetup s;
  s.model = policy::CausalLm(bench_config());
  s.model->to(bench_device(g_local_rank), on_gpu() ? torch::kBFloat16 : torch::kFloat32);
  for (auto& p : s.model->parameters()) s.elements += p.numel();
  s.comm = dist::make_communicator(MPI_COMM_WORLD, bench_device(g_local_rank));
  return s;
}

void report_bus_bandwidth(benchmark::State& state, int ranks, int64_t bytes) {
  // nccl-tests' bus bandwidth for all-reduce: bytes * 2 (n - 1) / n per second.
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["busbw_GBps"] = benchmark::Counter(bytes * 2.0 * (ranks - 1) / ranks / 1e9,
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

void sync_all(dist::Communicator& comm) {
  if (on_gpu()) torch::cuda::synchronize();
  comm.all_reduce_scalar(0);
}

void BM_GradAllReduce(benchmark::State& state) {
  AllReduceSetup s = make_all_reduce_setup();
  if (s.comm->size() < 2) {
    state.SkipWithError("needs 2+ MPI ranks (mpirun -np 2)");
    return;
  }
  std::vector<torch::Tensor> params;
  for (auto& p : s.model->parameters()) params.push_back(p);
  dist::ReducerOptions options;
  options.bucket_bytes = static_cast<size_t>(state.range(0)) << 20;
  dist::GradientReducer reducer(params, *s.comm, options);
  for (auto _ : state) {
    state.PauseTiming();
    sync_all(*s.comm);
    state.ResumeTiming();
    reducer.begin_step();  // as every training step does (no zeroing: launch() zeroes the slots no gradient reached)
    reducer.finish();      // no backward ran: launches every bucket, waits
    if (on_gpu()) torch::cuda::synchronize();
  }
  report_bus_bandwidth(state, s.comm->size(), s.elements * 4);
  state.counters["buckets"] = static_cast<double>(reducer.bucket_count());
}
// Fixed iteration counts: every rank must run the same number of collectives.
// Argument: bucket size in MiB (the default, dist::ReducerOptions, among them).
BENCHMARK(BM_GradAllReduce)->Arg(32)->Arg(64)->Arg(128)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(30);

void BM_RawAllReduce(benchmark::State& state) {
  AllReduceSetup s = make_all_reduce_setup();
  if (s.comm->size() < 2) {
    state.SkipWithError("needs 2+ MPI ranks (mpirun -np 2)");
    return;
  }
  torch::Tensor flat = torch::zeros({s.elements}, torch::TensorOptions().dtype(torch::kFloat32).device(bench_device(g_local_rank)));
  for (auto _ : state) {
    state.PauseTiming();
    sync_all(*s.comm);
    state.ResumeTiming();
    s.comm->all_reduce_sum(flat)->wait();
    if (on_gpu()) torch::cuda::synchronize();
  }
  report_bus_bandwidth(state, s.comm->size(), s.elements * 4);
}
BENCHMARK(BM_RawAllReduce)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(30);

}  // namespace

int main(int argc, char** argv) {
  try {
    bench_model_shape();  // a bad CRL_BENCH_MODEL is reported here, not as an abort mid-benchmark
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 2;
  }
  dist::MpiSession mpi(&argc, &argv);
  const dist::MpiRoles roles = dist::split_roles(MPI_COMM_WORLD, mpi.size());
  g_local_rank = roles.local_rank;
  // Only rank 0 reports; the others run the same benchmarks silently (collectives need them).
  if (mpi.rank() != 0) {
    std::vector<char*> quiet(argv, argv + argc);
    static char null_out[] = "--benchmark_out=/dev/null";
    quiet.push_back(null_out);
    int quiet_argc = static_cast<int>(quiet.size());
    benchmark::Initialize(&quiet_argc, quiet.data());
    benchmark::ConsoleReporter null_reporter;
    std::ofstream devnull("/dev/null");
    null_reporter.SetOutputStream(&devnull);
    null_reporter.SetErrorStream(&devnull);
    benchmark::RunSpecifiedBenchmarks(&null_reporter);
  } else {
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  crl::dist::MpiRoles(roles).release();
  return 0;
}
