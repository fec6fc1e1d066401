// Tests for the byte-level BPE trainer: its merges equal a naive re-counting trainer's, what it
// writes loads back through crl's Tokenizer and round-trips text, and bad options are refused.
#include "policy/bpe_trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/hash.h"
#include "policy/unicode.h"

namespace crl::policy {
namespace {

const std::string kCorpusPath = std::string(CRL_TEST_DATA_DIR) + "/policy/tokenizers/train_corpus.txt";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The simple reference: recount every pair of every word at each step, merge the most frequent
// (ties: smaller left id, then smaller right id). Returns the merges as token-string pairs.
std::vector<std::pair<std::string, std::string>> naive_merges(const std::string& corpus,
                                                              const BpeTrainerOptions& options) {
  std::map<std::string, int32_t> id;
  std::vector<std::string> tokens(options.special_tokens);
  std::vector<std::pair<char32_t, int>> alphabet;
  for (int b = 0; b < 256; ++b) alphabet.emplace_back(byte_to_unicode(static_cast<uint8_t>(b)), b);
  std::sort(alphabet.begin(), alphabet.end());
  std::array<std::string, 256> byte_token;
  for (const auto& [cp, b] : alphabet) {
    std::string s;
    append_utf8(s, cp);
    byte_token[b] = s;
    tokens.push_back(s);
  }
  for (size_t i = 0; i < tokens.size(); ++i) id[tokens[i]] = static_cast<int32_t>(i);
  std::map<std::string, int64_t> counts;
  std::vector<ByteRange> ranges;
  split_pretokens(corpus, options.pattern, ranges);
  for (const auto& [b, e] : ranges) ++counts[corpus.substr(b, e - b)];
  std::vector<std::pair<std::vector<std::string>, int64_t>> words;
  for (const auto& [w, c] : counts) {
    std::vector<std::string> symbols;
    for (unsigned char ch : w) symbols.push_back(byte_token[ch]);
    words.emplace_back(symbols, c);
  }
  std::vector<std::pair<std::string, std::string>> merges;
  while (static_cast<int32_t>(id.size()) < options.vocab_size) {
    std::map<std::pair<int32_t, int32_t>, int64_t> pairs;
    for (const auto& [symbols, c] : words) {
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{id[symbols[i]], id[symbols[i + 1]]}] += c;
    }
    std::pair<int32_t, int32_t> best{-1, -1};
    int64_t best_count = 0;
    for (const auto& [p, c] : pairs) {  // map order: ties keep the smaller pair
      if (c > best_count) {
        best = p;
        best_count = c;
      }
    }
    if (best_count < options.min_frequency) break;
    const std::string left = tokens[best.first], right = tokens[best.second];
    merges.emplace_back(left, right);
    if (!id.count(left + right)) {
      id[left + right] = static_cast<int32_t>(tokens.size());
      tokens.push_back(left + right);
    }
    for (auto& [symbols, c] : words) {
      std::vector<std::string> merged;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          merged.push_back(left + right);
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      }
      symbols = std::move(merged);
    }
  }
  return merges;
}

TEST(BpeTrainerTest, MergesEqualTheNaiveTrainer) {
  // ASCII text (NFC is then the identity) so the naive trainer needs no normaliser.
  const std::string corpus = read_text(kCorpusPath).substr(0, 12000);
  ASSERT_TRUE(std::all_of(corpus.begin(), corpus.end(), [](char c) { return c > 0; }));
  BpeTrainerOptions options;
  options.vocab_size = 3 + 256 + 300;
  const BpeTrainingResult result = train_byte_level_bpe(corpus, options);
  const auto json = nlohmann::json::parse(result.tokenizer_json);
  const auto expected = naive_merges(corpus, options);
  ASSERT_EQ(json["model"]["merges"].size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(json["model"]["merges"][i][0].get<std::string>(), expected[i].first) << "merge " << i;
    EXPECT_EQ(json["model"]["merges"][i][1].get<std::string>(), expected[i].second) << "merge " << i;
  }
  EXPECT_EQ(result.merges, static_cast<int32_t>(expected.size()));
}

TEST(BpeTrainerTest, WritesATokenizerThatLoadsAndRoundTrips) {
  const std::string corpus = read_text(kCorpusPath);
  BpeTrainerOptions options;
  options.vocab_size = 1000;
  const std::string path = ::testing::TempDir() + "crl_bpe_trainer_" + std::to_string(::getpid()) + ".json";
  const BpeTrainingResult result = train_byte_level_bpe_to_file(corpus, options, path);
  EXPECT_EQ(result.vocab_size, 1000);
  EXPECT_EQ(result.merges, 1000 - 3 - 256);
  const Tokenizer tok = Tokenizer::from_file(path);
  // CRL_KEEP_TRAINED_TOKENIZER=FILE keeps the trained tokenizer.json there, so Hugging Face can
  // be shown to load it: tools/golden/make_tokenizer_golden.py --check-crl-tokenizer FILE.
  if (const char* keep = std::getenv("CRL_KEEP_TRAINED_TOKENIZER")) {
    std::ofstream(keep, std::ios::binary) << read_text(path);
  }
  std::remove(path.c_str());
  EXPECT_EQ(tok.vocab_size(), 1000);
  EXPECT_EQ(tok.split_pattern(), SplitPattern::Qwen2);
  EXPECT_EQ(*tok.token_to_id("<|endoftext|>"), 0);
  EXPECT_EQ(*tok.token_to_id("<|im_end|>"), 2);
  EXPECT_TRUE(tok.is_special(1));

  const auto ids = tok.encode(corpus);
  EXPECT_LT(ids.size() * 2, corpus.size());  // 1000 tokens learnt on it compress it 2.5x
  EXPECT_EQ(tok.decode(ids), normalize(corpus, NormalForm::NFC));
  const auto chat = tok.encode("<|im_start|>user\n深度 🚀 e\xCC\x81<|im_end|>");
  EXPECT_EQ(chat.front(), 1);
  EXPECT_EQ(chat.back(), 2);
  EXPECT_EQ(tok.decode(chat), "<|im_start|>user\n深度 🚀 \xC3\xA9<|im_end|>");
  EXPECT_EQ(tok.decode(chat, true), "user\n深度 🚀 \xC3\xA9");
}

// Hugging Face loaded the tokenizer.json this trainer writes for train_corpus.txt at vocab 1000
// and encoded the golden cases (crl_trained/hf_ids.json, see tools/golden/); crl must agree.
TEST(BpeTrainerTest, HuggingFaceEncodesItsOutputAsCrlDoes) {
  const std::string data = std::string(CRL_TEST_DATA_DIR) + "/policy/tokenizers";
  const auto hf = nlohmann::json::parse(read_text(data + "/crl_trained/hf_ids.json"));
  BpeTrainerOptions options;
  options.vocab_size = 1000;
  const BpeTrainingResult result = train_byte_level_bpe(read_text(kCorpusPath), options);
  ASSERT_EQ(sha256_hex(result.tokenizer_json), hf["tokenizer_sha256"].get<std::string>())
      << "the trainer's output changed: regenerate crl_trained/hf_ids.json as "
         "tools/golden/make_tokenizer_golden.py says";
  const Tokenizer tok = Tokenizer::from_json(result.tokenizer_json, "trained");
  const auto cases = nlohmann::json::parse(read_text(data + "/qwen2_like/golden.json"))["cases"];
  size_t compared = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    ASSERT_TRUE(hf["ids"].contains(name)) << name;
    EXPECT_EQ(tok.encode(c["text"].get<std::string>()), hf["ids"][name].get<std::vector<int32_t>>())
        << "case " << name;
    ++compared;
  }
  EXPECT_GE(compared, 30u);
}

TEST(BpeTrainerTest, DeterministicAndStopsWhenPairsRunOut) {
  const std::string corpus = read_text(kCorpusPath).substr(0, 5000);
  BpeTrainerOptions options;
  options.vocab_size = 600;
  EXPECT_EQ(train_byte_level_bpe(corpus, options).tokenizer_json,
            train_byte_level_bpe(corpus, options).tokenizer_json);
  options.vocab_size = 100000;
  const auto small = train_byte_level_bpe("ab ab ab cd", options);
  EXPECT_LT(small.vocab_size, 300);
  // Words "ab" x1, " ab" x2, " cd" x1: (a,b) occurs 3 times, then (Ġ,ab) twice; every other
  // pair once, below min_frequency 2.
  const auto merges = nlohmann::json::parse(small.tokenizer_json)["model"]["merges"];
  ASSERT_EQ(merges.size(), 2u);
  EXPECT_EQ(merges[0], nlohmann::json::array({"a", "b"}));
  EXPECT_EQ(merges[1], nlohmann::json::array({"\xC4\xA0", "ab"}));  // "Ġ" + "ab"
  EXPECT_EQ(small.vocab_size, 3 + 256 + 2);
}

TEST(BpeTrainerTest, SpecialTokensInTheCorpusAreNeverMerged) {
  BpeTrainerOptions options;
  options.vocab_size = 400;
  const auto result = train_byte_level_bpe(
      "<|endoftext|><|endoftext|><|endoftext|> x <|endoftext|><|endoftext|>", options);
  for (const auto& m : nlohmann::json::parse(result.tokenizer_json)["model"]["merges"]) {
    EXPECT_EQ((m[0].get<std::string>() + m[1].get<std::string>()).find('|'), std::string::npos);
  }
}

TEST(BpeTrainerTest, RefusesBadOptions) {
  BpeTrainerOptions options;
  options.vocab_size = 100;
  EXPECT_THROW(train_byte_level_bpe("abc", options), InputError);
  options.vocab_size = 1000;
  options.special_tokens = {"<a>", "<a>"};
  EXPECT_THROW(train_byte_level_bpe("abc", options), InputError);
  options.special_tokens = {""};
  EXPECT_THROW(train_byte_level_bpe("abc", options), InputError);
  options.special_tokens = {"!"};  // the byte-level token of '!'
  EXPECT_THROW(train_byte_level_bpe("abc", options), InputError);
  options.special_tokens = {};
  EXPECT_THROW(train_byte_level_bpe("ab\xff", options), InputError);
}

}  // namespace
}  // namespace crl::policy
