// `crl init-model`'s library half: a random Qwen2/Llama model with a BPE tokenizer, in HF format.
#include "policy/init_model.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <dirent.h>

#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/read_file.h"
#include "policy/bpe_trainer.h"
#include "policy/model.h"
#include "policy/safetensors.h"
#include "policy/tokenizer.h"

namespace crl::policy {
namespace {

void check_positive(const char* option, int64_t value) {
  if (value <= 0) throw InputError(fmt::format("init-model: {} must be positive, is {}", option, value));
}

std::string read_corpus(const std::filesystem::path& path) {
  std::string text = read_file(path, "init-model corpus");
  if (text.empty()) throw InputError(fmt::format("init-model: the corpus {} is empty", path.string()));
  return text;
}

// True when `dir` holds any entry. Uses readdir: the std::filesystem directory functions that
// libtorch.so exports are not safe to call from a process that links it.
bool has_entries(const std::filesystem::path& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  bool any = false;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") {
      any = true;
      break;
    }
  }
  closedir(d);
  return any;
}

}  // namespace

InitModelResult init_model(const InitModelOptions& o) {
  check_positive("--hidden", o.hidden_size);
  check_positive("--layers", o.layers);
  check_positive("--heads", o.heads);
  check_positive("--kv-heads", o.kv_heads);
  check_positive("--vocab-size", o.vocab_size);
  check_positive("--max-positions", o.max_position_embeddings);
  if (o.hidden_size % o.heads != 0) {
    throw InputError(fmt::format("init-model: --heads {} does not divide --hidden {}", o.heads, o.hidden_size));
  }
  if (o.heads % o.kv_heads != 0) {
    throw InputError(fmt::format("init-model: --kv-heads {} does not divide --heads {}", o.kv_heads, o.heads));
  }
  if ((o.hidden_size / o.heads) % 2 != 0) {
    throw InputError(fmt::format("init-model: head size {} (hidden / heads) must be even", o.hidden_size / o.heads));
  }
  if (o.model_type != "qwen2" && o.model_type != "llama") {
    throw InputError(fmt::format("init-model: --arch \"{}\" is not qwen2 or llama", o.model_type));
  }
  if (o.dtype != "float32" && o.dtype != "bfloat16") {
    throw InputError(fmt::format("init-model: dtype \"{}\" is not float32 or bfloat16", o.dtype));
  }
  if (has_entries(o.out_dir) && !o.overwrite) {
    throw InputError(fmt::format("init-model: {} exists and is not empty (pass --force to overwrite)", o.out_dir.string()));
  }
  std::filesystem::create_directories(o.out_dir);

  BpeTrainerOptions trainer;
  trainer.vocab_size = o.vocab_size;
  const BpeTrainingResult trained = train_byte_level_bpe_to_file(read_corpus(o.corpus), trainer, o.out_dir / "tokenizer.json");
  const Tokenizer tokenizer = Tokenizer::from_file(o.out_dir / "tokenizer.json");
  const auto eos = tokenizer.token_to_id("<|endoftext|>");
  if (!eos) throw Error("init-model: the trained tokenizer has no <|endoftext|> token");

  ModelConfig c;
  c.model_type = o.model_type;
  c.vocab_size = o.model_vocab_size > 0 ? o.model_vocab_size : tokenizer.vocab_size();
  if (c.vocab_size < tokenizer.vocab_size()) {
    throw InputError(fmt::format("init-model: --model-vocab-size {} is smaller than the tokenizer's {}", c.vocab_size,
                                 tokenizer.vocab_size()));
  }
  c.hidden_size = o.hidden_size;
  c.intermediate_size = o.intermediate_size > 0 ? o.intermediate_size : ((o.hidden_size * 27 / 5 + 31) / 32) * 32;
  c.num_hidden_layers = o.layers;
  c.num_attention_heads = o.heads;
  c.num_key_value_heads = o.kv_heads;
  c.head_dim = o.hidden_size / o.heads;
  c.rms_norm_eps = 1e-6;
  c.max_position_embeddings = o.max_position_embeddings;
  c.tie_word_embeddings = o.tie_word_embeddings;
  c.attention_bias = o.model_type == "qwen2";
  c.attention_output_bias = false;
  c.initializer_range = o.initializer_range;
  c.dtype = o.dtype;
  c.eos_token_ids = {*eos};
  c.rope.theta = o.rope_theta;
  c.validate("init-model options");

  CausalLm model(c);
  init_weights(model, o.seed);
  const torch::ScalarType dtype = o.dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;
  NamedTensors named;
  int64_t parameters = 0;
  for (const auto& [name, tensor] : state_tensors(model)) {
    named.emplace_back(name, tensor.detach().to(dtype).contiguous());
    parameters += tensor.numel();
  }
  write_safetensors(o.out_dir / "model.safetensors", named, {{"format", "pt"}});
  write_file_atomically(o.out_dir / "config.json", c.to_json().dump(2) + "\n");
  nlohmann::json generation;
  generation["eos_token_id"] = *eos;
  generation["pad_token_id"] = *eos;
  generation["do_sample"] = true;
  generation["temperature"] = 1.0;
  generation["top_p"] = 1.0;
  write_file_atomically(o.out_dir / "generation_config.json", generation.dump(2) + "\n");
  // The special tokens for Hugging Face's AutoTokenizer, which otherwise takes a class's defaults
  // from config.json's model_type (Llama's <s> and </s>, absent here) or none. The generic class
  // reads tokenizer.json as it is.
  nlohmann::json tokenizer_config;
  tokenizer_config["tokenizer_class"] = "PreTrainedTokenizerFast";
  tokenizer_config["eos_token"] = "<|endoftext|>";
  tokenizer_config["pad_token"] = "<|endoftext|>";
  tokenizer_config["bos_token"] = nullptr;
  tokenizer_config["unk_token"] = nullptr;
  tokenizer_config["model_max_length"] = o.max_position_embeddings;
  tokenizer_config["clean_up_tokenization_spaces"] = false;
  write_file_atomically(o.out_dir / "tokenizer_config.json", tokenizer_config.dump(2) + "\n");
  return {c, tokenizer.vocab_size(), parameters};
}

}  // namespace crl::policy
