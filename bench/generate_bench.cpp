// Generation throughput of the engine, one benchmark per row of issue #16's table, each against
// the frozen pre-engine generate() (static_generate_baseline.h) on the same work:
//   Batch/B              B random prompts of PROMPT tokens, NEW new tokens each (rows: B = 1, 64);
//   GroupMixed           GROUP completions of one GROUP_PROMPT-token prompt, lengths GROUP_NEW*k/GROUP
//                        for k = 1..GROUP (varying lengths, one shared prefill);
//   *Baseline            the old static batch on the same work (for GroupMixed: GROUP copies of the
//                        prompt, every row decoded to GROUP_NEW; only the requested tokens count).
// Sampling from softmax at temperature 1, no stop tokens (transformers' do_sample=True, top_k=0).
// tokens_per_second: generated tokens / wall time of one call (prefill included), as
// tools/bench/hf_generate.py times transformers. roofline_fraction (Batch rows): decode tokens/s
// over B * HBM bandwidth / weight bytes, the bound of a decode step that reads the weights once.
//
// Env: CRL_BENCH_MODEL   model folder (default: the tiny golden model in tests/data, for a CPU check)
//      CRL_BENCH_DEVICE  cuda (default when available) or cpu;  CRL_BENCH_DTYPE bf16 (default) or fp32
//      CRL_BENCH_PROMPT 128, CRL_BENCH_NEW 256;  CRL_BENCH_GROUP 16, CRL_BENCH_GROUP_PROMPT 2048,
//      CRL_BENCH_GROUP_NEW 1024;  CRL_BENCH_GRAPH 0 = eager;  CRL_BENCH_KV_GB KV budget (16 on CUDA)
//      CRL_BENCH_FUSED=0: ATen and cuBLAS only, without crl's inference kernels (EngineOptions::fused_kernels)
//      CRL_BENCH_HBM_GBPS 4800 (H200);  CRL_BENCH_PROFILE=N: the kernels of one eager N-token run per row, to stderr
//  BM_Projection: one decode projection, crl's small-rows kernel against cuBLAS, per row count (GPU
//                time: 200 calls replayed as one CUDA graph).
// Run:  build-gpu/bench/bench_generate --benchmark_format=json
#include <ATen/CPUGeneratorImpl.h>
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "kernel_profile.h"
#include "static_generate_baseline.h"
#include "policy/engine.h"
#include "policy/generate.h"
#ifdef CRL_HAVE_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "policy/inference_kernels_cuda.h"
#endif
#include "policy/model.h"

namespace {

using namespace crl::policy;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}
int64_t env_int(const char* name, int64_t fallback) { return std::stoll(env_or(name, std::to_string(fallback))); }

struct BenchSetup {
  CausalLm model{nullptr};
  std::string device, dtype, model_dir;
  int64_t prompt_tokens = 128, new_tokens = 256;
  int64_t group = 16, group_prompt = 2048, group_new = 1024;
  bool graph = true, fused = false;
  double weight_bytes = 0, hbm_bytes_per_second = 4.8e12;
  std::unique_ptr<GenerationEngine> engine;
};

// Destroyed by main() before the process exits: a static's destructor would free CUDA tensors and
// graphs after the CUDA runtime unloaded ("driver shutting down", an abort at exit).
std::unique_ptr<BenchSetup> g_setup;

BenchSetup& setup() {
  std::unique_ptr<BenchSetup>& s = g_setup;
  if (!s) {
    s = std::make_unique<BenchSetup>();
    s->model_dir = env_or("CRL_BENCH_MODEL", std::string(CRL_SOURCE_DIR) + "/tests/data/policy/models/qwen2_gqa2_tied");
    s->device = env_or("CRL_BENCH_DEVICE", torch::cuda::is_available() ? "cuda" : "cpu");
    s->dtype = env_or("CRL_BENCH_DTYPE", "bf16");
    s->prompt_tokens = env_int("CRL_BENCH_PROMPT", 128);
    s->new_tokens = env_int("CRL_BENCH_NEW", 256);
    s->group = env_int("CRL_BENCH_GROUP", 16);
    s->group_prompt = env_int("CRL_BENCH_GROUP_PROMPT", 2048);
    s->group_new = env_int("CRL_BENCH_GROUP_NEW", 1024);
    s->graph = env_or("CRL_BENCH_GRAPH", "1") != "0";
    s->hbm_bytes_per_second = std::stod(env_or("CRL_BENCH_HBM_GBPS", "4800")) * 1e9;
    s->model = load_causal_lm(s->model_dir, parse_dtype(s->dtype), parse_device(s->device));
    for (const auto& p : s->model->parameters()) s->weight_bytes += static_cast<double>(p.numel() * p.element_size());
    EngineOptions engine;
    const double default_gb = s->device == "cpu" ? 0.25 : 16;
    engine.kv_cache_bytes = static_cast<int64_t>(std::stod(env_or("CRL_BENCH_KV_GB", std::to_string(default_gb))) * (1 << 30));
    engine.fused_kernels = env_or("CRL_BENCH_FUSED", "1") == "1";
    s->fused = engine.fused_kernels;
    s->engine = std::make_unique<GenerationEngine>(s->model, engine);  // one cache and graph set for every benchmark
  }
  return *s;
}

// Random prompt ids (fixed seed), as the transformers side draws them.
std::vector<std::vector<int64_t>> random_prompts(int64_t batch, int64_t length, uint64_t seed, int64_t vocab) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const torch::Tensor ids = at::randint(vocab, {batch, length}, gen, torch::kInt64);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t b = 0; b < batch; ++b) {
    const torch::Tensor row = ids[b].contiguous();
    prompts.emplace_back(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + length);
  }
  return prompts;
}

GenerationOptions sampling_options(const BenchSetup& s, int64_t max_new) {
  GenerationOptions options;
  options.max_new_tokens = max_new;
  options.sampling.temperature = 1.0;
  options.sampling.seed = 7;
  options.use_cuda_graph = s.graph;
  return options;
}

void synchronize(const BenchSetup& s) {
  if (s.device != "cpu") torch::cuda::synchronize();
}

// CRL_BENCH_PROFILE=N: the kernels of one eager run of `requests` with N new tokens each (its
// prefill included), to stderr, once per row of the benchmark.
void profile_eager_run(BenchSetup& s, std::vector<GenerationRequest> requests, const std::string& what) {
  const int64_t steps = env_int("CRL_BENCH_PROFILE", 0);
  if (steps <= 0 || s.device == "cpu") return;
  for (auto& r : requests) r.max_new_tokens = std::min(r.max_new_tokens.value_or(steps), steps);
  GenerationOptions eager = sampling_options(s, steps);
  eager.use_cuda_graph = false;
  std::fprintf(stderr, "Kernels of one eager %s run of %lld decode steps, prefill included (divide by the steps for one step):\n",
               what.c_str(), static_cast<long long>(steps));
  s.engine->run(requests, eager);
  crl::bench::print_kernel_profile(1, [&] { s.engine->run(requests, eager); });
}

// Times engine runs of `requests`; reports tokens/s, decode tokens/s, prefill and the graph count.
void time_engine(benchmark::State& state, BenchSetup& s, const std::vector<GenerationRequest>& requests,
                 const GenerationOptions& options, double rows_for_roofline) {
  s.engine->run(requests, options);  // warm-up: kernels chosen, graphs captured
  double decode = 0, prefill = 0, tokens = 0, steps = 0, rows = 0;
  bool graph_used = false;
  for (auto _ : state) {
    const GenerationResult r = s.engine->run(requests, options);
    decode += r.decode_seconds;
    prefill += r.prefill_seconds;
    graph_used = r.used_cuda_graph;
    steps += static_cast<double>(r.decode_steps);
    rows += static_cast<double>(r.decoded_rows);
    for (const auto& seq : r.sequences) tokens += static_cast<double>(seq.tokens.size());
  }
  state.counters["tokens_per_second"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
  state.counters["decode_tokens_per_second"] = decode > 0 ? tokens / decode : 0;
  state.counters["decode_ms_per_step"] = steps > 0 ? 1000 * decode / steps : 0;
  state.counters["mean_running"] = steps > 0 ? rows / steps : 0;
  state.counters["prefill_ms"] = 1000 * prefill / static_cast<double>(state.iterations());
  state.counters["cuda_graph"] = graph_used ? 1 : 0;
  state.counters["graphs_captured"] = static_cast<double>(s.engine->graphs_captured());
  if (rows_for_roofline > 0 && decode > 0) {
    const double bound = rows_for_roofline * s.hbm_bytes_per_second / s.weight_bytes;
    state.counters["roofline_tokens_per_second"] = bound;
    state.counters["roofline_fraction"] = tokens / decode / bound;
  }
  state.SetLabel(s.device + " " + s.dtype + (s.fused ? " fused" : "") + " " + s.model_dir);
}

// Times the frozen static batch on `prompts` with `new_tokens` each; `useful` tokens count.
void time_baseline(benchmark::State& state, BenchSetup& s, const std::vector<std::vector<int64_t>>& prompts, int64_t new_tokens,
                   double useful) {
  crl::bench::StaticBatchBaseline warm(s.model, prompts, 4);
  warm.run(7);
  for (auto _ : state) {
    crl::bench::StaticBatchBaseline baseline(s.model, prompts, new_tokens);  // the old code allocated per call
    baseline.run(7);
    synchronize(s);
  }
  state.counters["tokens_per_second"] = benchmark::Counter(useful * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(s.device + " " + s.dtype + " " + s.model_dir);
}

void BM_Batch(benchmark::State& state) {
  BenchSetup& s = setup();
  const int64_t batch = state.range(0);
  const auto prompts = random_prompts(batch, s.prompt_tokens, 1234 + batch, s.model->config().vocab_size);
  std::vector<GenerationRequest> requests;
  for (const auto& p : prompts) requests.push_back({p, 1, std::nullopt, std::nullopt});
  const GenerationOptions options = sampling_options(s, s.new_tokens);
  static std::set<int64_t> profiled;
  if (profiled.insert(batch).second) {
    profile_eager_run(s, requests, fmt::format("batch-{}", batch));
  }
  time_engine(state, s, requests, options, static_cast<double>(batch));
}

void BM_BatchBaseline(benchmark::State& state) {
  BenchSetup& s = setup();
  const int64_t batch = state.range(0);
  const auto prompts = random_prompts(batch, s.prompt_tokens, 1234 + batch, s.model->config().vocab_size);
  time_baseline(state, s, prompts, s.new_tokens, static_cast<double>(batch * s.new_tokens));
}

// The group row: lengths GROUP_NEW * k / GROUP, k = 1..GROUP.
std::vector<int64_t> group_lengths(const BenchSetup& s) {
  std::vector<int64_t> lengths;
  for (int64_t k = 1; k <= s.group; ++k) lengths.push_back(std::max<int64_t>(1, s.group_new * k / s.group));
  return lengths;
}

void BM_GroupMixed(benchmark::State& state) {
  BenchSetup& s = setup();
  const auto prompt = random_prompts(1, s.group_prompt, 99, s.model->config().vocab_size)[0];
  std::vector<GenerationRequest> requests;
  int64_t k = 0;
  for (int64_t length : group_lengths(s)) requests.push_back({prompt, 1, k++, length});  // one prompt: one prefill
  static bool profiled = false;
  if (!std::exchange(profiled, true)) profile_eager_run(s, requests, "group");
  time_engine(state, s, requests, sampling_options(s, s.group_new), 0);
}

void BM_GroupMixedBaseline(benchmark::State& state) {
  BenchSetup& s = setup();
  const auto prompt = random_prompts(1, s.group_prompt, 99, s.model->config().vocab_size)[0];
  double useful = 0;
  for (int64_t length : group_lengths(s)) useful += static_cast<double>(length);
  time_baseline(state, s, std::vector<std::vector<int64_t>>(static_cast<size_t>(s.group), prompt), s.group_new, useful);
}

#ifdef CRL_HAVE_CUDA
// One decode projection at Qwen2-0.5B's shapes (bf16), crl's small-rows kernel against cuBLAS
// (at::linear per weight; the down projection after silu_mul): microseconds per call and the
// weights' bytes per second. Args: rows, shape (0 q/k/v, 1 o, 2 gate/up, 3 down, 4 the lm_head:
// 272 MB of tied embeddings, a decode step's largest read, which the model leaves to cuBLAS), 1 =
// crl's kernel.
void BM_Projection(benchmark::State& state) {
  if (!torch::cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t rows = state.range(0), shape = state.range(1);
  const bool crl_kernel = state.range(2) == 1;
  // Qwen2-0.5B's decode projections: q/k/v, o, gate/up with silu(gate) * up, down.
  struct Shape {
    int64_t k;
    std::vector<int64_t> n;
    bool gated;
  };
  const Shape shapes[] = {{896, {896, 128, 128}, false},
                          {896, {896}, false},
                          {896, {4864, 4864}, true},
                          {4864, {896}, false},
                          {896, {151936}, false}};
  const Shape& sh = shapes[shape];
  const auto options = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  const torch::Tensor x = torch::randn({rows, sh.k}, options);
  std::vector<torch::Tensor> weights, outputs;
  std::vector<cuda::LinearSegment> segments;
  double bytes = 0;
  for (int64_t n : sh.n) {
    weights.push_back(torch::randn({n, sh.k}, options) * 0.02);
    outputs.push_back(torch::empty({rows, n}, options));
    segments.push_back({weights.back().data_ptr(), nullptr, outputs.back().data_ptr(), n});
    bytes += static_cast<double>(n * sh.k * 2);
  }
  const torch::Tensor hidden = torch::empty({rows, sh.n[0]}, options);  // cuBLAS's gated output
  const auto call = [&] {  // on the current stream (the capture's, below)
    if (crl_kernel && sh.gated) {
      cuda::small_rows_gated_linear(cuda::ElementType::bf16, x.data_ptr(), rows, sh.k, segments[0], segments[1],
                                    c10::cuda::getCurrentCUDAStream().stream());
    } else if (crl_kernel) {
      cuda::small_rows_linear(cuda::ElementType::bf16, x.data_ptr(), rows, sh.k, segments.data(), static_cast<int>(segments.size()),
                              c10::cuda::getCurrentCUDAStream().stream());
    } else if (sh.gated) {  // what the model runs above the kernel's limit: two GEMMs, then silu_mul
      at::linear_out(outputs[0], x, weights[0]);
      at::linear_out(outputs[1], x, weights[1]);
      cuda::silu_mul(cuda::ElementType::bf16, outputs[0].data_ptr(), outputs[1].data_ptr(), hidden.data_ptr(), hidden.numel(),
                     c10::cuda::getCurrentCUDAStream().stream());
    } else {
      for (size_t i = 0; i < weights.size(); ++i) at::linear_out(outputs[i], x, weights[i]);
    }
  };
  for (int i = 0; i < 20; ++i) call();
  torch::cuda::synchronize();
  // The calls as one CUDA graph, as the engine's decode step replays them: GPU time per call, not
  // the host's launch rate (an eager at::linear costs ~15 us of host time, more than its kernel).
  constexpr int kCalls = 200;
  at::cuda::CUDAGraph graph;
  {
    const c10::cuda::CUDAStream capture_stream = c10::cuda::getStreamFromPool();
    const c10::cuda::CUDAStreamGuard guard(capture_stream);
    graph.capture_begin();
    for (int i = 0; i < kCalls; ++i) call();
    graph.capture_end();
  }
  graph.replay();
  torch::cuda::synchronize();
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    graph.replay();
    torch::cuda::synchronize();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double per_call = seconds / (static_cast<double>(state.iterations()) * kCalls);
  state.counters["us_per_call"] = per_call * 1e6;
  state.counters["weight_GBps"] = bytes / per_call / 1e9;
  state.SetLabel(crl_kernel ? "crl small_rows_linear" : "cuBLAS (at::linear)");
}
BENCHMARK(BM_Projection)
    ->ArgsProduct({{1, 2, 4, 8, 12, 16}, {0, 1, 2, 3, 4}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->Iterations(5);
#endif

BENCHMARK(BM_Batch)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_BatchBaseline)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
BENCHMARK(BM_GroupMixed)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
BENCHMARK(BM_GroupMixedBaseline)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  g_setup.reset();  // while the CUDA runtime is still loaded
  benchmark::Shutdown();
  return 0;
}
