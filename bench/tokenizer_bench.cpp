// Tokenizer throughput: encode MB/s on C++/CUDA source text (tests/data/policy/tokenizers/
// train_corpus.txt) with the golden Qwen2-like and Llama 3-like tokenizers, cold (fresh cache)
// and warm, next to Hugging Face tokenizers' Python encode on the same text and tokenizer.
// Run: build/bench/bench_tokenizer   (the HF figure comes from $CRL_HF_BENCH_JSON, default the
// committed tests/data/policy/tokenizers/hf_encode_bench.json; to measure both in one session:
//   python3 tools/golden/make_tokenizer_golden.py --out /tmp/g && \
//   CRL_HF_BENCH_JSON=/tmp/g/hf_encode_bench.json build/bench/bench_tokenizer)
// Counters: bytes_per_second is crl's rate in MiB/s of CPU time; hf_MB_per_s is HF's in MB/s of
// CPU time; x_hf is crl's rate over HF's (Google Benchmark prints rate counters with "/s").
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "policy/bpe_trainer.h"
#include "policy/tokenizer.h"

namespace {

const std::string kDataDir = std::string(CRL_SOURCE_DIR) + "/tests/data/policy/tokenizers";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string& corpus() {
  static const std::string text = read_text(kDataDir + "/train_corpus.txt");
  return text;
}

// Hugging Face's warm and cold encode MB/s for `kind`, or 0 when no figure is at hand.
std::pair<double, double> hf_figures(const std::string& kind) {
  const char* env = std::getenv("CRL_HF_BENCH_JSON");
  const std::string path = env ? env : kDataDir + "/hf_encode_bench.json";
  std::ifstream in(path);
  if (!in) return {0, 0};
  try {
    const auto j = nlohmann::json::parse(in);
    return {j.at(kind).at("warm_mb_per_s").get<double>(), j.at(kind).at("cold_mb_per_s").get<double>()};
  } catch (const std::exception&) {
    return {0, 0};
  }
}

void report(benchmark::State& state, const std::string& kind, bool warm) {
  const double bytes = static_cast<double>(corpus().size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  const auto [hf_warm, hf_cold] = hf_figures(kind);
  const double hf = warm ? hf_warm : hf_cold;
  if (hf > 0) {
    state.counters["hf_MB_per_s"] = hf;
    // MB/s of crl over HF's: bytes per second (rate counter) divided by HF's bytes per second.
    state.counters["x_hf"] = benchmark::Counter(bytes / (hf * 1e6) * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
  }
}

void BM_EncodeWarm(benchmark::State& state, const std::string& kind) {
  const auto tok = crl::policy::Tokenizer::from_file(kDataDir + "/" + kind + "/tokenizer.json");
  tok.encode(corpus());  // fills the piece cache
  size_t tokens = 0;
  for (auto _ : state) {
    const auto ids = tok.encode(corpus(), false);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens"] = static_cast<double>(tokens);
  report(state, kind, true);
}

void BM_EncodeCold(benchmark::State& state, const std::string& kind) {
  const std::string json = read_text(kDataDir + "/" + kind + "/tokenizer.json");
  for (auto _ : state) {
    state.PauseTiming();
    const auto tok = crl::policy::Tokenizer::from_json(json, kind);  // empty cache
    state.ResumeTiming();
    const auto ids = tok.encode(corpus(), false);
    benchmark::DoNotOptimize(ids.data());
  }
  report(state, kind, false);
}

void BM_Pretokenize(benchmark::State& state) {
  std::vector<crl::policy::ByteRange> pieces;
  for (auto _ : state) {
    pieces.clear();
    crl::policy::split_pretokens(corpus(), crl::policy::SplitPattern::Qwen2, pieces);
    benchmark::DoNotOptimize(pieces.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(corpus().size()));
}

void BM_TrainBpe(benchmark::State& state) {
  crl::policy::BpeTrainerOptions options;
  options.vocab_size = static_cast<int32_t>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(crl::policy::train_byte_level_bpe(corpus(), options));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(corpus().size()));
}

BENCHMARK_CAPTURE(BM_EncodeWarm, qwen2_like, std::string("qwen2_like"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncodeWarm, llama3_like, std::string("llama3_like"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncodeCold, qwen2_like, std::string("qwen2_like"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncodeCold, llama3_like, std::string("llama3_like"))->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Pretokenize)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainBpe)->Arg(1000)->Arg(3000)->Unit(benchmark::kMillisecond);

}  // namespace
