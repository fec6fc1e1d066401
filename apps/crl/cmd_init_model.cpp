// `crl init-model --out DIR --corpus FILE [...]`: a new random Qwen2/Llama model in Hugging Face
// format, with a byte-level BPE tokenizer trained on the corpus.
#include <fmt/format.h>

#include <iostream>

#include "apps/crl/commands.h"
#include "apps/crl/input_paths.h"
#include "policy/init_model.h"

namespace crl::cli {

void add_init_model_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("init-model",
                                 "Make a random Qwen2/Llama model (config.json, model.safetensors, tokenizer.json "
                                 "trained on a corpus, tokenizer_config.json, generation_config.json) that transformers loads");
  static policy::InitModelOptions o;
  static std::string out_dir, corpus;
  static bool untied = false;
  cmd->add_option("--out", out_dir, "Folder to write (must be empty unless --force)")->required();
  cmd->add_option("--corpus", corpus, "UTF-8 text file the tokenizer is trained on")->required()->check(existing_input(PathKind::file, "--corpus"));
  cmd->add_option("--vocab-size", o.vocab_size, "Tokenizer vocabulary (specials + 256 bytes + merges)")->capture_default_str();
  cmd->add_option("--model-vocab-size", o.model_vocab_size, "Embedding rows if larger than the tokenizer's (0: same)")->capture_default_str();
  cmd->add_option("--arch", o.model_type, "qwen2 or llama")->capture_default_str()->check(CLI::IsMember({"qwen2", "llama"}));
  cmd->add_option("--hidden", o.hidden_size, "Hidden size")->capture_default_str();
  cmd->add_option("--intermediate", o.intermediate_size, "MLP size (0: about 5.4 x hidden)")->capture_default_str();
  cmd->add_option("--layers", o.layers, "Decoder layers")->capture_default_str();
  cmd->add_option("--heads", o.heads, "Attention heads")->capture_default_str();
  cmd->add_option("--kv-heads", o.kv_heads, "Key/value heads (grouped-query attention)")->capture_default_str();
  cmd->add_option("--max-positions", o.max_position_embeddings, "max_position_embeddings")->capture_default_str();
  cmd->add_option("--rope-theta", o.rope_theta, "Rotary base")->capture_default_str();
  cmd->add_option("--init-std", o.initializer_range, "initializer_range: weights ~ normal(0, this)")->capture_default_str();
  cmd->add_option("--dtype", o.dtype, "Stored weights: float32 or bfloat16")->capture_default_str()->check(CLI::IsMember({"float32", "bfloat16"}));
  cmd->add_option("--seed", o.seed, "Seed of the weights")->capture_default_str();
  cmd->add_flag("--untied", untied, "Separate lm_head instead of tied embeddings");
  cmd->add_flag("--force", o.overwrite, "Write into a non-empty folder");
  cmd->callback([&exit_code] {
    o.out_dir = out_dir;
    o.corpus = corpus;
    o.tie_word_embeddings = !untied;
    const auto result = policy::init_model(o);
    std::cout << fmt::format("wrote {}: {} {} layers, hidden {}, heads {}/{} kv, vocab {} (tokenizer {}), {:.2f} M parameters\n",
                             out_dir, result.config.model_type, result.config.num_hidden_layers,
                             result.config.hidden_size, result.config.num_attention_heads,
                             result.config.num_key_value_heads, result.config.vocab_size, result.tokenizer_vocab_size,
                             result.parameters / 1e6);
    exit_code = kExitOk;
  });
}

}  // namespace crl::cli
