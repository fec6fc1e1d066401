// Tests for the byte-level BPE tokenizer: token-for-token agreement with Hugging Face
// `tokenizers` on golden files (tools/golden/make_tokenizer_golden.py), the split-pattern
// scanner against hand-derived regex matches, Unicode helpers, and rejection of bad input.
#include "policy/tokenizer.h"

#include <gtest/gtest.h>

#include <functional>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "policy/tokenizer_pretokenizer.h"
#include "policy/unicode.h"

namespace crl::policy {
namespace {

const std::string kGoldenDir = std::string(CRL_TEST_DATA_DIR) + "/policy/tokenizers";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> pieces(std::string_view text, SplitPattern pattern) {
  std::vector<ByteRange> ranges;
  split_pretokens(text, pattern, ranges);
  std::vector<std::string> out;
  for (const auto& [b, e] : ranges) out.emplace_back(text.substr(b, e - b));
  return out;
}

using Pieces = std::vector<std::string>;

// ---------------------------------------------------------------------------------------------
// Golden agreement with Hugging Face tokenizers 0.23.2

class GoldenTokenizerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTokenizerTest, MatchesHuggingFaceTokenForToken) {
  const std::string dir = kGoldenDir + "/" + GetParam();
  const Tokenizer tok = Tokenizer::from_file(dir + "/tokenizer.json");
  const nlohmann::json golden = read_json(dir + "/golden.json");
  ASSERT_GE(golden["cases"].size(), 30u);
  for (const auto& c : golden["cases"]) {
    const std::string name = c["name"], text = c["text"];
    SCOPED_TRACE("case " + name);
    EXPECT_EQ(tok.encode(text, true, true), c["ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(tok.encode(text, false, true), c["ids_without_template"].get<std::vector<int32_t>>());
    EXPECT_EQ(tok.encode(text, false, false), c["ids_special_as_text"].get<std::vector<int32_t>>());
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.decode(ids, false), c["decoded"].get<std::string>());
    EXPECT_EQ(tok.decode(ids, true), c["decoded_skip_special"].get<std::string>());
  }
  for (const auto& p : golden["partial_decodes"]) {
    const auto ids = p["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.decode(ids), p["decoded"].get<std::string>()) << p["ids"].dump();
  }
}

TEST_P(GoldenTokenizerTest, EncodesTheTrainingCorpusAndRoundTrips) {
  const std::string dir = kGoldenDir + "/" + GetParam();
  const Tokenizer tok = Tokenizer::from_file(dir);  // a directory works too
  const std::string corpus = read_text(kGoldenDir + "/train_corpus.txt");
  const auto ids = tok.encode(corpus, false, false);
  // The BPE learnt on this text compresses it well; every id is in range.
  EXPECT_LT(ids.size(), corpus.size() / 2);
  for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size());
  // Qwen2-like normalises to NFC; GPT-2-like adds a prefix space.
  std::string expected = corpus;
  if (tok.split_pattern() == SplitPattern::Qwen2) expected = normalize(corpus, NormalForm::NFC);
  if (tok.split_pattern() == SplitPattern::Gpt2) expected = " " + corpus;
  EXPECT_EQ(tok.decode(ids), expected);
  // Second pass comes from the cache and must agree with the first.
  EXPECT_GT(tok.cache_size(), 0u);
  EXPECT_EQ(tok.encode(corpus, false, false), ids);
}

TEST_P(GoldenTokenizerTest, ConcurrentEncodesAgree) {
  const Tokenizer tok = Tokenizer::from_file(kGoldenDir + "/" + GetParam() + "/tokenizer.json");
  const std::string corpus = read_text(kGoldenDir + "/train_corpus.txt");
  const auto expected = tok.encode(corpus);
  std::vector<std::vector<int32_t>> results(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] { results[t] = tok.encode(corpus); });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(results[0], expected);
  EXPECT_EQ(results[1], expected);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GoldenTokenizerTest,
                         ::testing::Values("qwen2_like", "llama3_like", "gpt2_like"));

TEST(TokenizerTest, SpecialTokensAndTemplate) {
  const Tokenizer llama = Tokenizer::from_file(kGoldenDir + "/llama3_like/tokenizer.json");
  const int32_t bos = *llama.token_to_id("<|begin_of_text|>");
  const int32_t im_end = *llama.token_to_id("<|im_end|>");
  EXPECT_TRUE(llama.is_special(bos));
  EXPECT_TRUE(llama.is_special(im_end));
  const auto ids = llama.encode("hi<|im_end|>");
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), bos);
  EXPECT_EQ(ids.back(), im_end);
  EXPECT_EQ(llama.decode(ids, true), "hi");
  EXPECT_EQ(llama.decode(ids, false), "<|begin_of_text|>hi<|im_end|>");
  // Unparsed, the special token's text is ordinary text.
  const auto plain = llama.encode("hi<|im_end|>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), im_end), 0);
  EXPECT_EQ(llama.decode(plain), "hi<|im_end|>");
  const Tokenizer qwen = Tokenizer::from_file(kGoldenDir + "/qwen2_like/tokenizer.json");
  EXPECT_EQ(qwen.encode("x", true).size(), qwen.encode("x", false).size());  // no template
}

TEST(TokenizerTest, ManyAddedTokensWithACommonPrefixMatchLongestFirst) {
  // As Llama 3's 256 <|reserved_special_token_N|>: N=1 must not win inside N=12.
  nlohmann::json j = read_json(kGoldenDir + "/llama3_like/tokenizer.json");
  const int32_t first_id = Tokenizer::from_json(j.dump(), "llama3_like").vocab_size();  // ids stay dense
  for (int n = 0; n < 256; ++n) {
    j["added_tokens"].push_back({{"id", first_id + n},
                                 {"content", "<|reserved_special_token_" + std::to_string(n) + "|>"},
                                 {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                                 {"normalized", false}, {"special", true}});
  }
  const Tokenizer tok = Tokenizer::from_json(j.dump(), "reserved.json");
  const auto ids = tok.encode("<|reserved_special_token_12|><|reserved_special_token_1|>x "
                              "<|reserved_special_token_2", false);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], first_id + 12);
  EXPECT_EQ(ids[1], first_id + 1);
  EXPECT_EQ(tok.decode(ids), "<|reserved_special_token_12|><|reserved_special_token_1|>x "
                             "<|reserved_special_token_2");
  EXPECT_EQ(tok.decode(ids, true), "x <|reserved_special_token_2");
  EXPECT_EQ(tok.vocab_size(), first_id + 256);
}

TEST(TokenizerTest, DecodeBytesKeepsPartialCharacters) {
  const Tokenizer tok = Tokenizer::from_file(kGoldenDir + "/qwen2_like/tokenizer.json");
  const auto ids = tok.encode("🚀", false);
  ASSERT_GE(ids.size(), 2u);  // the rocket is not one token of this small vocabulary
  const std::string first = tok.decode_bytes({ids.data(), 1});
  EXPECT_LT(first.size(), 4u);
  EXPECT_EQ(tok.decode_bytes(ids), "🚀");
  EXPECT_EQ(tok.decode({ids.data(), 1}).substr(0, 3), "\xEF\xBF\xBD");
}

TEST(TokenizerTest, RejectsBadInput) {
  const Tokenizer tok = Tokenizer::from_file(kGoldenDir + "/qwen2_like/tokenizer.json");
  EXPECT_THROW(tok.encode("abc\xff"), InputError);
  EXPECT_THROW(tok.decode(std::vector<int32_t>{-1}), InputError);
  EXPECT_THROW(tok.decode(std::vector<int32_t>{tok.vocab_size()}), InputError);
  EXPECT_THROW(Tokenizer::from_file(kGoldenDir + "/missing.json"), IoError);
}

// A real Qwen2 checkpoint's embedding has 290 rows past its tokenizer's last id: a sampled one
// decodes to nothing (as in Hugging Face), where decode() refuses it.
TEST(TokenizerTest, SampledIdsPastTheVocabularyDecodeToNothing) {
  const Tokenizer tok = Tokenizer::from_file(kGoldenDir + "/qwen2_like/tokenizer.json");
  const auto ids32 = tok.encode("int main", false);
  std::vector<int64_t> ids(ids32.begin(), ids32.end());
  const std::string text = tok.decode_sampled(ids);
  EXPECT_EQ(text, "int main");
  ids.insert(ids.begin() + 1, tok.vocab_size());
  ids.push_back(tok.vocab_size() + 289);
  EXPECT_EQ(tok.decode_sampled(ids), text);
  EXPECT_THROW(tok.decode_sampled(std::vector<int64_t>{-1}), InputError);
}

TEST(TokenizerTest, RefusesWhatItDoesNotImplement) {
  nlohmann::json base = read_json(kGoldenDir + "/qwen2_like/tokenizer.json");
  const auto expect_refusal = [](const nlohmann::json& j, const std::string& field) {
    try {
      Tokenizer::from_json(j.dump(), "edited.json");
      ADD_FAILURE() << "accepted an edit of " << field;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("edited.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  auto j = base;
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  expect_refusal(j, "pattern.Regex");
  j = base;
  j["model"]["merges"].push_back("zzzq qqqz");
  expect_refusal(j, "model.merges");
  j = base;
  j["model"]["merges"].push_back("a b c");
  expect_refusal(j, "model.merges");
  j = base;
  j["model"]["byte_fallback"] = true;
  expect_refusal(j, "model.byte_fallback");
  j = base;
  j["model"]["type"] = "WordPiece";
  expect_refusal(j, "model.type");
  j = base;
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_refusal(j, "normalizer");
  j = base;
  j["decoder"] = {{"type", "WordPiece"}};
  expect_refusal(j, "decoder");
  j = base;
  j["added_tokens"][0]["id"] = 5;  // id 5 is a different model token
  expect_refusal(j, "added_tokens[0]");
  EXPECT_THROW(Tokenizer::from_json("{", "broken.json"), InputError);
  // Top-level fields: truncation and padding would change encode's output, so only null passes;
  // an unknown field is refused rather than ignored.
  j = base;
  j["truncation"] = {{"max_length", 8}, {"strategy", "LongestFirst"}, {"stride", 0}, {"direction", "Right"}};
  expect_refusal(j, "truncation");
  j = base;
  j["padding"] = {{"strategy", "BatchLongest"}, {"pad_id", 0}, {"pad_token", "<|endoftext|>"}};
  expect_refusal(j, "padding");
  j = base;
  j["chat_template"] = "{{ messages }}";
  expect_refusal(j, "chat_template");
  j = base;
  j.erase("truncation");
  j.erase("padding");
  EXPECT_NO_THROW(Tokenizer::from_json(j.dump(), "without.json"));
}

// The vocabulary is dense, so an id at or above the number of entries is refused before anything
// is sized by it (INT32_MAX once made max_id + 1 overflow, or a 16 GB table).
TEST(TokenizerTest, IdsOutsideTheDenseVocabularyAreRefused) {
  const nlohmann::json base = read_json(kGoldenDir + "/llama3_like/tokenizer.json");
  const auto error_of = [](const nlohmann::json& j) -> std::string {
    try {
      Tokenizer::from_json(j.dump(), "ids.json");
    } catch (const InputError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  const int64_t entries = static_cast<int64_t>(base["model"]["vocab"].size());
  auto j = base;
  j["model"]["vocab"]["zzz_new"] = 2147483647;
  EXPECT_NE(error_of(j).find("tokenizer ids.json: model.vocab: token 'zzz_new' has id 2147483647, not an integer "
                             "in [0, " + std::to_string(entries + 1) + ")"),
            std::string::npos)
      << error_of(j);
  j = base;
  j["model"]["vocab"]["zzz_new"] = entries + 5;  // a gap
  EXPECT_NE(error_of(j).find("model.vocab: token 'zzz_new'"), std::string::npos) << error_of(j);
  j = base;
  j["model"]["vocab"]["zzz_new"] = -1;
  EXPECT_NE(error_of(j).find("model.vocab"), std::string::npos);
  j = base;
  j["added_tokens"][4]["id"] = 2147483647;
  EXPECT_NE(error_of(j).find("tokenizer ids.json: added_tokens[4].id: missing or not an integer in [0, "),
            std::string::npos)
      << error_of(j);
  j = base;
  j["added_tokens"][4]["id"] = 9223372036854775807LL;
  EXPECT_NE(error_of(j).find("added_tokens[4].id"), std::string::npos) << error_of(j);
  // The template's ids must name tokens: TemplateProcessing's special_tokens.
  j = base;
  const std::string bos = "<|begin_of_text|>";
  ASSERT_TRUE(j["post_processor"].dump().find("special_tokens") != std::string::npos) << j["post_processor"].dump();
  std::function<void(nlohmann::json&)> set_ids = [&](nlohmann::json& node) {
    if (node.is_object()) {
      if (node.contains("special_tokens")) {
        for (auto& [name, token] : node["special_tokens"].items()) token["ids"] = {2147483647};
      }
      for (auto& [key, child] : node.items()) set_ids(child);
    } else if (node.is_array()) {
      for (auto& child : node) set_ids(child);
    }
  };
  set_ids(j["post_processor"]);
  EXPECT_NE(error_of(j).find("special_tokens: '" + bos + "' has id 2147483647, which is not a token of this "
                             "tokenizer"),
            std::string::npos)
      << error_of(j);
}

// ---------------------------------------------------------------------------------------------
// Split patterns: expectations worked out by hand from the regexes' semantics.

TEST(SplitPatternTest, RecognisesTheRegexesOfTokenizerJson) {
  for (auto p : {SplitPattern::Gpt2, SplitPattern::Llama3, SplitPattern::Qwen2}) {
    EXPECT_EQ(split_pattern_from_regex(split_pattern_regex(p)), p);
  }
  EXPECT_FALSE(split_pattern_from_regex("\\s+").has_value());
}

TEST(SplitPatternTest, Qwen2) {
  const auto q = SplitPattern::Qwen2;
  EXPECT_EQ(pieces("Hello world", q), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces("a  b", q), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(pieces("x   ", q), (Pieces{"x", "   "}));
  EXPECT_EQ(pieces("12345", q), (Pieces{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(pieces("\n\n  x", q), (Pieces{"\n\n", " ", " x"}));
  EXPECT_EQ(pieces("a \n b", q), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(pieces("foo();\n}", q), (Pieces{"foo", "();\n", "}"}));
  EXPECT_EQ(pieces("I'M it's", q), (Pieces{"I", "'M", " it", "'s"}));
  EXPECT_EQ(pieces("'x", q), (Pieces{"'x"}));
  EXPECT_EQ(pieces("\t\tint", q), (Pieces{"\t", "\tint"}));
  EXPECT_EQ(pieces(" !!", q), (Pieces{" !!"}));
  EXPECT_EQ(pieces("x\r\n\r\ny", q), (Pieces{"x", "\r\n\r\n", "y"}));
  EXPECT_EQ(pieces("深度 学习", q), (Pieces{"深度", " 学习"}));
  // A mark is not \p{L}: it is the optional non-letter before the next word.
  EXPECT_EQ(pieces("e\xCC\x81x", q), (Pieces{"e", "\xCC\x81x"}));
  EXPECT_EQ(pieces("", q), Pieces{});
}

TEST(SplitPatternTest, Llama3GroupsDigitsByThree) {
  const auto l = SplitPattern::Llama3;
  EXPECT_EQ(pieces("1234567", l), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(pieces("x=10000;", l), (Pieces{"x", "=", "100", "00", ";"}));
  EXPECT_EQ(pieces(" 12", l), (Pieces{" ", "12"}));
}

TEST(SplitPatternTest, Gpt2) {
  const auto g = SplitPattern::Gpt2;
  EXPECT_EQ(pieces("Hello  world 123!", g), (Pieces{"Hello", " ", " world", " 123", "!"}));
  EXPECT_EQ(pieces("I'M it's", g), (Pieces{"I", "'", "M", " it", "'s"}));  // case-sensitive
  EXPECT_EQ(pieces("a\n\nb", g), (Pieces{"a", "\n", "\n", "b"}));
}

TEST(SplitPatternTest, PiecesTileTheText) {
  const std::string text = read_text(kGoldenDir + "/train_corpus.txt");
  for (auto p : {SplitPattern::Gpt2, SplitPattern::Llama3, SplitPattern::Qwen2}) {
    std::string joined;
    for (const auto& piece : pieces(text, p)) {
      ASSERT_FALSE(piece.empty());
      joined += piece;
    }
    EXPECT_EQ(joined, text);
  }
}

// ---------------------------------------------------------------------------------------------
// Unicode helpers

TEST(UnicodeTest, ByteLevelAlphabet) {
  EXPECT_EQ(byte_to_unicode(' '), U'\u0120');  // 'Ġ'
  EXPECT_EQ(byte_to_unicode('\n'), U'\u010A');  // 'Ċ'
  EXPECT_EQ(byte_to_unicode(0), U'\u0100');
  EXPECT_EQ(byte_to_unicode('A'), U'A');
  EXPECT_EQ(byte_to_unicode(0xAD), U'\u0143');
  for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode_to_byte(byte_to_unicode(static_cast<uint8_t>(b))), b);
  EXPECT_EQ(unicode_to_byte(U'\u4e00'), -1);
}

TEST(UnicodeTest, Classes) {
  EXPECT_EQ(char_class(U'a'), CharClass::Letter);
  EXPECT_EQ(char_class(U'深'), CharClass::Letter);
  EXPECT_EQ(char_class(U'٣'), CharClass::Number);
  EXPECT_EQ(char_class(U'Ⅻ'), CharClass::Number);
  EXPECT_EQ(char_class(U'\u3000'), CharClass::Whitespace);
  EXPECT_EQ(char_class(U'\u0085'), CharClass::Whitespace);
  EXPECT_EQ(char_class(U'\u200B'), CharClass::Other);  // zero-width space is not White_Space
  EXPECT_EQ(char_class(U'\u0301'), CharClass::Other);
  EXPECT_EQ(char_class(U'🚀'), CharClass::Other);
  EXPECT_TRUE(is_word_char(U'_'));
  EXPECT_TRUE(is_word_char(U'\u200D'));
  EXPECT_TRUE(is_word_char(U'\u0301'));
  EXPECT_TRUE(is_word_char(U'Ⅻ'));
  EXPECT_FALSE(is_word_char(U'①'));
  EXPECT_FALSE(is_word_char(U'-'));
}

TEST(UnicodeTest, Utf8) {
  EXPECT_TRUE(is_valid_utf8("héllo 深 🚀"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));      // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));  // surrogate
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));      // truncated
  EXPECT_EQ(utf8_lossy("a\xE2\x82" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(utf8_lossy("\xF0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("ok"), "ok");
  try {
    decode_utf8("abc\xff");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("byte 3"), std::string::npos);
  }
  EXPECT_EQ(normalize("e\xCC\x81", NormalForm::NFC), "\xC3\xA9");
  EXPECT_EQ(normalize("\xC3\xA9", NormalForm::NFD), "e\xCC\x81");
  EXPECT_EQ(normalize("\xEF\xAC\x81", NormalForm::NFKC), "fi");
  // NFC runs utf8proc only on stretches around characters from U+0300 up; the result must equal
  // NFC of the whole text (here NFD of mixed text, recomposed): A+ring, e+acute, Hangul jamo,
  // a mark after an ASCII letter, an Angstrom sign, marks in non-canonical order.
  const std::string mixed =
      "int x; // A\xCC\x8A e\xCC\x81t\xC3\xA9 \xE1\x84\x80\xE1\x85\xA1 \xE2\x84\xAB q\xCC\xA3\xCC\x87 "
      "\xC3\xA9\xCC\x81 \xE6\xB7\xB1 x\xCC\x81";
  EXPECT_EQ(normalize(mixed, NormalForm::NFC),
            normalize(normalize(mixed, NormalForm::NFD), NormalForm::NFC));
  EXPECT_EQ(normalize("A\xCC\x8A", NormalForm::NFC), "\xC3\x85");
  EXPECT_EQ(normalize("ab\xE1\x84\x80\xE1\x85\xA1" "cd", NormalForm::NFC), "ab\xEA\xB0\x80" "cd");
}

}  // namespace
}  // namespace crl::policy
