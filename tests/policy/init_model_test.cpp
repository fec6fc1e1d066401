// `crl init-model`: the folder it writes loads back (config, weights, tokenizer), is seeded, and
// refuses bad options; `crl generate` on it is reproducible from the seed. With the golden Python
// (tests/policy/golden_python.h), also checks that transformers loads the folder and computes the
// same logits and token ids.
#include <gtest/gtest.h>

#include "golden_python.h"
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "core/error.h"
#include "core/remove_tree.h"
#include "core/subprocess.h"
#include "policy/init_model.h"
#include "policy/model.h"
#include "policy/safetensors.h"
#include "policy/tokenizer.h"

namespace crl::policy {
namespace {

// The models here are tiny: one intra-op thread is fastest and keeps a busy CI machine from
// stalling in OpenMP spin-waits.
const bool kSingleThreaded = (torch::set_num_threads(1), true);

namespace fs = std::filesystem;


std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class InitModel : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("crl_init_model_test_" + std::to_string(::getpid()));
    remove_tree(root_);
    fs::create_directories(root_);
    corpus_ = root_ / "corpus.txt";
    std::ofstream out(corpus_);
    for (int i = 0; i < 40; ++i) {
      out << "__global__ void add(const float* a, const float* b, float* c, int n) {\n"
             "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) c[i] = a[i] + b[i];\n}\n"
             "The kernel adds two vectors; each thread handles element " << i << ".\n";
    }
  }
  void TearDown() override { remove_tree(root_); }

  InitModelOptions small(const std::string& name) const {
    InitModelOptions o;
    o.out_dir = root_ / name;
    o.corpus = corpus_;
    o.vocab_size = 300;
    o.hidden_size = 64;
    o.layers = 2;
    o.heads = 4;
    o.kv_heads = 2;
    o.max_position_embeddings = 512;
    o.seed = 5;
    return o;
  }

  fs::path root_, corpus_;
};

TEST_F(InitModel, WritesAFolderThatLoadsBack) {
  const InitModelOptions o = small("m");
  const InitModelResult result = init_model(o);
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    EXPECT_TRUE(fs::exists(o.out_dir / file)) << file;
  }
  const ModelConfig config = load_model_config(o.out_dir);
  // The special tokens AutoTokenizer takes from tokenizer_config.json are the model's.
  const auto tokenizer_config = nlohmann::json::parse(std::ifstream(o.out_dir / "tokenizer_config.json"));
  const auto eos = Tokenizer::from_file(o.out_dir).token_to_id(tokenizer_config.at("eos_token").get<std::string>());
  ASSERT_TRUE(eos.has_value());
  EXPECT_EQ(std::vector<int64_t>{*eos}, config.eos_token_ids);
  EXPECT_EQ(tokenizer_config.at("pad_token"), tokenizer_config.at("eos_token"));
  EXPECT_EQ(config.vocab_size, result.tokenizer_vocab_size);
  EXPECT_EQ(config.hidden_size, 64);
  EXPECT_EQ(config.num_key_value_heads, 2);
  EXPECT_TRUE(config.tie_word_embeddings);
  const Tokenizer tokenizer = Tokenizer::from_file(o.out_dir);
  EXPECT_EQ(tokenizer.vocab_size(), result.tokenizer_vocab_size);
  ASSERT_EQ(config.eos_token_ids.size(), 1u);
  EXPECT_EQ(tokenizer.token_to_id("<|endoftext|>").value_or(-1), config.eos_token_ids[0]);
  CausalLm model = load_causal_lm(o.out_dir, torch::kFloat32, torch::kCPU);
  const auto ids = tokenizer.encode("__global__ void add(");
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(torch::tensor(std::vector<int64_t>(ids.begin(), ids.end())).view({1, -1}));
  EXPECT_EQ(logits.size(2), config.vocab_size);
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
  // Weights ~ normal(0, 0.02), as transformers initialises them.
  const SafetensorsCheckpoint checkpoint(o.out_dir);
  EXPECT_NEAR(checkpoint.tensor("model.layers.0.mlp.up_proj.weight").std().item<double>(), 0.02, 0.002);
}

TEST_F(InitModel, SameSeedSameBytesOtherSeedOtherWeights) {
  InitModelOptions a = small("a"), b = small("b"), c = small("c");
  c.seed = 6;
  init_model(a);
  init_model(b);
  init_model(c);
  EXPECT_EQ(read_file(a.out_dir / "model.safetensors"), read_file(b.out_dir / "model.safetensors"));
  EXPECT_EQ(read_file(a.out_dir / "tokenizer.json"), read_file(b.out_dir / "tokenizer.json"));
  EXPECT_NE(read_file(a.out_dir / "model.safetensors"), read_file(c.out_dir / "model.safetensors"));
}

TEST_F(InitModel, RefusesBadOptionsAndNonEmptyFolders) {
  InitModelOptions o = small("bad");
  o.kv_heads = 3;
  EXPECT_THROW(init_model(o), InputError);
  o = small("bad");
  o.heads = 5;
  EXPECT_THROW(init_model(o), InputError);
  o = small("bad");
  o.model_vocab_size = 10;  // smaller than the tokenizer
  EXPECT_THROW(init_model(o), InputError);
  o = small("twice");
  init_model(o);
  EXPECT_THROW(init_model(o), InputError);
  o.overwrite = true;
  EXPECT_NO_THROW(init_model(o));
}

#ifdef CRL_EXE
TEST_F(InitModel, CliInitModelThenGenerateIsReproducible) {
  // No build dependency on crl (it links every module); a full build has it, a partial one skips.
  if (!fs::exists(CRL_EXE)) GTEST_SKIP() << CRL_EXE << " is not built";
  const fs::path dir = root_ / "cli";
  auto r = run_command({CRL_EXE, "init-model", "--out", dir.string(), "--corpus", corpus_.string(), "--vocab-size", "300",
                        "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--seed", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto generate = [&](const std::string& seed) {
    const auto g = run_command({CRL_EXE, "generate", "--model", dir.string(), "--prompt", "__global__ void", "--prompt",
                                "The kernel", "--max-new-tokens", "8", "--seed", seed, "--ignore-eos", "--json"});
    EXPECT_EQ(g.exit_code, 0) << g.output;
    const auto begin = g.output.find('{');
    const auto j = nlohmann::json::parse(g.output.substr(begin));
    std::vector<std::vector<int64_t>> tokens;
    for (const auto& c : j["completions"]) tokens.push_back(c["tokens"].get<std::vector<int64_t>>());
    return tokens;
  };
  const auto first = generate("9");
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].size(), 8u);
  EXPECT_EQ(first, generate("9"));
  EXPECT_NE(first, generate("10"));
  // Bad input exits 3, bad arguments 2.
  EXPECT_EQ(run_command({CRL_EXE, "generate", "--model", dir.string(), "--prompt-ids", "1,x"}).exit_code, 3);
  EXPECT_EQ(run_command({CRL_EXE, "generate", "--model", dir.string(), "--prompt", "a", "--dtype", "int8"}).exit_code, 2);
}
#endif

// transformers must load what init-model writes and compute the same thing.
TEST_F(InitModel, TransformersLoadsItAndAgrees) {
  const std::string python = testing::golden_python().string();
  if (python.empty()) {
    GTEST_SKIP() << "no golden Python with transformers: set CRL_GOLDEN_PYTHON or make ~/.local/share/crl/golden-venv (README)";
  }
  const InitModelOptions o = small("hf");
  init_model(o);
  const std::string text = "__global__ void add(const float* a) { c[i] = a[i]; }";
  const fs::path out = root_ / "hf_logits.safetensors";
  const std::string script =
      "import sys, torch\n"
      "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
      "from safetensors.torch import save_file\n"
      "d, text, out = sys.argv[1], sys.argv[2], sys.argv[3]\n"
      "m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()\n"
      "t = AutoTokenizer.from_pretrained(d)\n"
      "ids = torch.tensor([t(text)['input_ids']])\n"
      "with torch.no_grad(): logits = m(ids).logits\n"
      "save_file({'ids': ids.contiguous(), 'logits': logits.contiguous()}, out)\n";
  const auto r = run_command({python, "-c", script, o.out_dir.string(), text, out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const SafetensorsFile hf(out);
  const Tokenizer tokenizer = Tokenizer::from_file(o.out_dir);
  const auto ids = tokenizer.encode(text);
  const torch::Tensor ours_ids = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end())).view({1, -1});
  ASSERT_TRUE(torch::equal(ours_ids, hf.tensor("ids")));
  CausalLm model = load_causal_lm(o.out_dir, torch::kFloat32, torch::kCPU);
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(ours_ids);
  const torch::Tensor expected = hf.tensor("logits");
  EXPECT_LE(((logits - expected).abs().max() / expected.abs().max()).item<double>(), 1e-4);
}

}  // namespace
}  // namespace crl::policy
