// The generation engine: continuous batching over a paged KV cache under a memory budget.
//
// A run takes requests (a prompt and how many completions to sample from it) and keeps a running
// set of sequences: each step decodes one token for every running sequence (no padding rows for
// finished ones), and as sequences finish (stop token, stop string, token limit) waiting ones are
// admitted, as far as the KV budget allows. A prompt is prefilled once (all but its last token) into
// blocks that its samples share by reference count; a sample copies only the prompt's partly
// filled last block, then feeds the prompt's last token as its first decode input, so every token
// of every sample is drawn in a decode step from that sample's own key.
//
// Admission reserves the blocks a sequence can need at most (prompt + max_new_tokens), so a running
// sequence never waits for memory and nothing is ever preempted; the number of sequences in flight
// is what the budget holds (and at most EngineOptions::max_running).
//
// On CUDA the decode step (model forward and sampling) is captured as a CUDA graph once per shape
// bucket (running sequences rounded up to a power of two; blocks read rounded up to a power of two,
// then to a multiple of 16) and replayed; graphs and the cache persist across runs, and are
// recaptured only when the model's parameters or LoRA adapters change. Each step copies its inputs
// to the device in one transfer and reads the sampled tokens back in one (the only host sync).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "policy/generate.h"
#include "policy/kv_cache.h"
#include "policy/model.h"

namespace crl::policy {

struct EngineOptions {
  int64_t kv_cache_bytes = int64_t{1} << 30;  // the paged pool's size (all layers, keys and values)
  int64_t block_size = 16;                    // token slots per block
  int64_t max_running = 256;                  // sequences decoded together at most
  // crl's inference kernels in the engine's forwards on CUDA (model.h, FusedInferenceKernels):
  // RMSNorm, rotary with the cache write, SiLU-multiply, the projections of <= 8 rows, attention
  // straight from the paged cache. Off: ATen and cuBLAS ops only (the A/B baseline, CRL_BENCH_FUSED=0).
  bool fused_kernels = true;
  void validate() const;
};

struct GenerationRequest {
  std::vector<int64_t> prompt;
  int64_t samples = 1;  // completions drawn from this prompt (a GRPO group: G)
  // Sampling key of the first sample (the others follow: +1, +2, ...). Unset: the sample's index in
  // the run's flat result. The key and the seed alone decide a sample's random draws.
  std::optional<int64_t> first_sequence_id;
  // This request's token limit, at most the run's max_new_tokens (unset: the run's).
  std::optional<int64_t> max_new_tokens;
};

class GenerationEngine {
 public:
  GenerationEngine(CausalLm model, EngineOptions options);
  ~GenerationEngine();
  GenerationEngine(const GenerationEngine&) = delete;
  GenerationEngine& operator=(const GenerationEngine&) = delete;

  // Runs every request to completion. result.sequences: request 0's samples, then request 1's, ...
  GenerationResult run(const std::vector<GenerationRequest>& requests, const GenerationOptions& options,
                       const TokenDecoder& decode = nullptr);

  // The blocks one sequence needs at most: its share of the prompt's (all but the last token)
  // partly filled block plus max_new_tokens, and the prompt's full blocks, which its group shares.
  struct BlockNeed {
    int64_t prompt_blocks = 0;  // held once per prompt while its samples are admitted
    int64_t shared_blocks = 0;  // the prompt's full blocks, shared by its samples
    int64_t own_blocks = 0;     // per sample
  };
  static BlockNeed block_need(int64_t prompt_tokens, int64_t max_new_tokens, int64_t block_size);

  const PagedKvCache& cache() const { return cache_; }
  int64_t graphs_captured() const { return static_cast<int64_t>(graphs_.size()); }
  // Blocks that can hold sequences (the pool less its scratch block).
  int64_t usable_blocks() const { return cache_.num_blocks - 1; }
  int64_t free_blocks() const { return allocator_.free_blocks(); }

 private:
  struct Sequence;
  struct Prompt;
  struct Graph;
  using GraphKey = std::tuple<int64_t, int64_t, double, int64_t, double>;  // rows, blocks, sampling

  // One pass over the prompts (all but their last tokens, blocks already allocated) into the cache.
  void prefill(const std::vector<Prompt*>& prompts, GenerationResult& result);
  // One decode step of `running`; appends a token to each.
  void decode_step(std::vector<Sequence*>& running, const GenerationOptions& options, GenerationResult& result);
  // The model forward and sampling of a step whose inputs are packed in `inputs` [rows, 5 + blocks]
  // (columns: token, position, write slot, length after the step, random bits; then the block table).
  torch::Tensor step_outputs(const torch::Tensor& inputs, int64_t blocks, const SamplingOptions& sampling);
  Graph& graph_for(int64_t rows, int64_t blocks, const GenerationOptions& options);
  uint64_t model_signature() const;

  CausalLm model_;
  EngineOptions options_;
  PagedKvCache cache_;
  BlockAllocator allocator_;
  torch::Tensor staging_;  // pinned host buffer of a step's inputs (CUDA)
  std::map<GraphKey, std::unique_ptr<Graph>> graphs_;
  uint64_t graph_signature_ = 0;
  std::optional<std::pair<unsigned long long, unsigned long long>> graph_pool_;  // shared by every graph (at::cuda::MempoolId_t)
};

}  // namespace crl::policy
