// Generation throughput: tokens per second for NEW new tokens after a PROMPT-token prompt, at
// several batch sizes, end to end (prefill + decode, as transformers' generate() is timed).
// tools/bench/hf_generate.py makes the model, runs this and transformers on the same weights and
// writes both figures to $OUT/generate_bench.json.
//
// Env: CRL_BENCH_MODEL   model folder (default: the tiny golden model in tests/data, for a CPU check)
//      CRL_BENCH_DEVICE  cuda (default when available) or cpu;  CRL_BENCH_DTYPE bf16 (default) or fp32
//      CRL_BENCH_PROMPT  prompt tokens (128);  CRL_BENCH_NEW  new tokens (256);  CRL_BENCH_GRAPH 0 = eager
// Run:  build-gpu/bench/bench_generate --benchmark_format=json
#include <ATen/CPUGeneratorImpl.h>
#include <benchmark/benchmark.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "policy/generate.h"
#include "policy/model.h"

namespace {

using namespace crl::policy;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

struct BenchSetup {
  CausalLm model{nullptr};
  std::string device, dtype, model_dir;
  int64_t prompt_tokens = 128, new_tokens = 256;
  bool graph = true;
};

BenchSetup& setup() {
  static std::unique_ptr<BenchSetup> s;
  if (!s) {
    s = std::make_unique<BenchSetup>();
    s->model_dir = env_or("CRL_BENCH_MODEL", std::string(CRL_SOURCE_DIR) + "/tests/data/policy/models/qwen2_gqa2_tied");
    s->device = env_or("CRL_BENCH_DEVICE", torch::cuda::is_available() ? "cuda" : "cpu");
    s->dtype = env_or("CRL_BENCH_DTYPE", "bf16");
    s->prompt_tokens = std::stoll(env_or("CRL_BENCH_PROMPT", "128"));
    s->new_tokens = std::stoll(env_or("CRL_BENCH_NEW", "256"));
    s->graph = env_or("CRL_BENCH_GRAPH", "1") != "0";
    s->model = load_causal_lm(s->model_dir, parse_dtype(s->dtype), parse_device(s->device));
  }
  return *s;
}

void BM_Generate(benchmark::State& state) {
  BenchSetup& s = setup();
  const int64_t batch = state.range(0);
  const int64_t vocab = s.model->config().vocab_size;
  // Random prompt ids (fixed seed), all of full length, as the transformers side uses.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1234 + batch);
  const torch::Tensor ids = at::randint(vocab, {batch, s.prompt_tokens}, gen, torch::kInt64);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t b = 0; b < batch; ++b) {
    const torch::Tensor row = ids[b].contiguous();
    prompts.emplace_back(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + s.prompt_tokens);
  }
  GenerationOptions options;
  options.max_new_tokens = s.new_tokens;
  options.sampling.temperature = 1.0;  // plain sampling from softmax, as transformers' do_sample=True, top_k=0
  options.sampling.seed = 7;
  options.use_cuda_graph = s.graph;
  {
    GenerationOptions warm = options;
    warm.max_new_tokens = 4;
    generate(s.model, prompts, warm);  // kernels, cuBLAS handles, allocator warm
  }
  double decode = 0, prefill = 0;
  int64_t tokens = 0;
  bool graph_used = false;
  for (auto _ : state) {
    const GenerationResult r = generate(s.model, prompts, options);
    decode += r.decode_seconds;
    prefill += r.prefill_seconds;
    graph_used = r.used_cuda_graph;
    for (const auto& seq : r.sequences) tokens += static_cast<int64_t>(seq.tokens.size());
  }
  state.counters["tokens_per_second"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["decode_tokens_per_second"] = decode > 0 ? tokens / decode : 0;
  state.counters["prefill_ms"] = 1000 * prefill / state.iterations();
  state.counters["cuda_graph"] = graph_used ? 1 : 0;
  state.SetLabel(s.device + " " + s.dtype + " " + s.model_dir);
}

BENCHMARK(BM_Generate)->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace
