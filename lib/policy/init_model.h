// Making a new small model in Hugging Face format (for tests, the built-in default job, and
// benchmarks): config.json, model.safetensors (random init as transformers does), tokenizer.json
// (a byte-level BPE trained on a given corpus), tokenizer_config.json (its special tokens) and
// generation_config.json. transformers' AutoModelForCausalLM / AutoTokenizer load the folder as is.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "policy/config.h"

namespace crl::policy {

struct InitModelOptions {
  std::filesystem::path out_dir;
  std::filesystem::path corpus;       // UTF-8 text the tokenizer is trained on
  int32_t vocab_size = 1024;          // tokenizer target (specials + 256 bytes + merges)
  int64_t model_vocab_size = 0;       // 0: the tokenizer's; larger pads the embedding (as Qwen does)
  std::string model_type = "qwen2";   // qwen2 or llama
  int64_t hidden_size = 128;
  int64_t intermediate_size = 0;      // 0: about 5.4 x hidden (Qwen2's ratio), a multiple of 32
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t max_position_embeddings = 4096;
  double rope_theta = 1000000.0;
  bool tie_word_embeddings = true;
  double initializer_range = 0.02;
  std::string dtype = "float32";      // float32 or bfloat16: how the weights are stored
  uint64_t seed = 0;
  bool overwrite = false;             // allow writing into a non-empty out_dir
};

struct InitModelResult {
  ModelConfig config;
  int32_t tokenizer_vocab_size = 0;
  int64_t parameters = 0;
};

// Validates the options (InputError naming the option), trains the tokenizer, initialises the
// weights from `seed`, and writes the five files (each atomically).
InitModelResult init_model(const InitModelOptions& options);

}  // namespace crl::policy
