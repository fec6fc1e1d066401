// crl's tokenizer against Hugging Face `tokenizers` at a realistic size: byte-level BPEs with 33k
// merges in the Qwen2 and Llama 3 forms (their split regexes, special tokens after the
// vocabulary, 256 reserved tokens, the <|begin_of_text|> template, byte fallback for characters
// the corpus never showed), trained on the Python standard library and libstdc++ headers of the
// machine by tools/golden/make_real_tokenizer_golden.py, once per build folder. Skips without a
// Python that has `tokenizers` (tools/setup.sh installs it).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "core/read_file.h"
#include "core/subprocess.h"
#include "golden_python.h"
#include "policy/tokenizer.h"

namespace crl::policy {
namespace {

namespace fs = std::filesystem;

// The folder holding qwen2/ and llama3/ (tokenizer.json, golden.json), made on first use; empty
// (with `why` set) when it cannot be made here.
fs::path golden_dir(std::string* why) {
  const fs::path dir = fs::path(CRL_BINARY_DIR) / "golden" / "real_tokenizers";
  if (fs::exists(dir / "llama3" / "golden.json")) return dir;
  // One process makes it (ctest runs these tests in several at once); the others wait for it.
  fs::create_directories(dir.parent_path());
  const int lock = ::open((dir.string() + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  struct Unlock {
    int fd;
    ~Unlock() {
      if (fd >= 0) ::close(fd);
    }
  } unlock{lock};
  if (fs::exists(dir / "llama3" / "golden.json")) return dir;
  const fs::path python = testing::golden_python();
  if (python.empty()) {
    *why = "no Python with Hugging Face's libraries (tools/setup.sh installs them)";
    return {};
  }
  const fs::path partial = dir.string() + ".partial";
  const auto r = run_command({python.string(), std::string(CRL_SOURCE_DIR) + "/tools/golden/make_real_tokenizer_golden.py",
                              "--out", partial.string()},
                             {.timeout = std::chrono::minutes(10)});
  if (!r.ok()) {
    *why = "make_real_tokenizer_golden.py failed: " + r.output;
    return {};
  }
  fs::rename(partial, dir);
  return dir;
}

class RealTokenizerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    dir_ = golden_dir(&why);
    if (dir_.empty()) GTEST_SKIP() << why;
    dir_ /= GetParam();
  }
  fs::path dir_;
};

TEST_P(RealTokenizerTest, HasARealisticVocabulary) {
  const auto j = nlohmann::json::parse(read_file(dir_ / "tokenizer.json", "tokenizer"));
  EXPECT_GE(j["model"]["merges"].size(), 32768u);
  const Tokenizer tok = Tokenizer::from_file(dir_);
  EXPECT_GE(tok.vocab_size(), 33000);
  EXPECT_EQ(tok.split_pattern(), GetParam() == "qwen2" ? SplitPattern::Qwen2 : SplitPattern::Llama3);
  if (GetParam() == "llama3") {
    const auto reserved = tok.token_to_id("<|reserved_special_token_255|>");
    ASSERT_TRUE(reserved.has_value());
    EXPECT_EQ(*reserved, tok.vocab_size() - 1);  // specials come after the vocabulary, as in Llama 3
    EXPECT_TRUE(tok.is_special(*reserved));
  } else {
    EXPECT_EQ(tok.token_to_id("<|im_end|>"), tok.vocab_size() - 1);
  }
}

TEST_P(RealTokenizerTest, MatchesHuggingFaceTokenForToken) {
  const Tokenizer tok = Tokenizer::from_file(dir_ / "tokenizer.json");
  const auto golden = nlohmann::json::parse(read_file(dir_ / "golden.json", "golden data"));
  ASSERT_GE(golden["cases"].size(), 200u);
  size_t held_out = 0, byte_fallback = 0;
  for (const auto& c : golden["cases"]) {
    const std::string name = c["name"], text = c["text"];
    SCOPED_TRACE("case " + name);
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text, true, true), ids);
    EXPECT_EQ(tok.encode(text, false, true), c["ids_without_template"].get<std::vector<int32_t>>());
    EXPECT_EQ(tok.encode(text, false, false), c["ids_special_as_text"].get<std::vector<int32_t>>());
    EXPECT_EQ(tok.decode(ids, false), c["decoded"].get<std::string>());
    EXPECT_EQ(tok.decode(ids, true), c["decoded_skip_special"].get<std::string>());
    if (name.starts_with("held_out_")) ++held_out;
    if (name == "emoji" || name == "cjk_zh") {
      // Characters a code corpus never shows become byte tokens (ids below 256 + merges of bytes).
      byte_fallback += ids.size() > text.size() / 4 ? 1 : 0;
    }
  }
  EXPECT_GE(held_out, 5u);      // real code the BPE was not trained on
  EXPECT_EQ(byte_fallback, 2u);  // emoji and Chinese fell back to bytes
  for (const auto& p : golden["partial_decodes"]) {
    EXPECT_EQ(tok.decode(p["ids"].get<std::vector<int32_t>>()), p["decoded"].get<std::string>()) << p["ids"].dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, RealTokenizerTest, ::testing::Values("qwen2", "llama3"));

}  // namespace
}  // namespace crl::policy
