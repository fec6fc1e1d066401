// Benchmarks of core utilities: SHA-256 throughput (cache keys hash whole program sources).
#include <benchmark/benchmark.h>

#include <string>

#include "core/hash.h"

static void BM_Sha256(benchmark::State& state) {
  const std::string data(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) benchmark::DoNotOptimize(crl::sha256_hex(data));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Sha256)->Arg(1 << 10)->Arg(64 << 10);
