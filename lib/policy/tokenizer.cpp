// Byte-level BPE tokenizer from tokenizer.json; see tokenizer.h. The pipeline follows Hugging
// Face `tokenizers`: added tokens split out of the raw text, the rest normalised, normalised
// added tokens split out, pre-tokenized, and each piece merged by the BPE model.
#include "policy/tokenizer.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <mutex>
#include <queue>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_bounded.h"
#include "core/read_file.h"
#include "policy/unicode.h"

namespace crl::policy {
namespace {

using nlohmann::json;

// Pieces longer than this are merged every time rather than cached (they are rare and would
// crowd the cache); the cache is emptied when it reaches kCacheCapacity entries.
constexpr size_t kMaxCachedPieceBytes = 256;
constexpr size_t kCacheCapacity = 1 << 18;
// Ids are int32; no tokenizer in use comes near 2^24 tokens (Qwen2 has 151,665).
constexpr int64_t kMaxTokens = int64_t{1} << 24;

// Lets the piece cache be searched with a string_view, without building a key string.
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Added tokens of one kind (matched on raw or on normalised text) in a byte trie, so a scan finds
// the leftmost-longest match, as Hugging Face's Aho-Corasick automaton does, in time linear in
// the match length however many tokens share a prefix (Llama 3 has 256 "<|reserved_...").
class AddedTokenMatcher {
 public:
  bool empty() const { return nodes_.size() == 1; }

  void add(const std::string& text, size_t token) {
    if (text.empty()) return;
    int32_t node = 0;
    for (unsigned char b : text) {
      auto& children = nodes_[node].children;
      auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(b, int32_t{-1}));
      if (it == children.end() || it->first != b) {
        const int32_t child = static_cast<int32_t>(nodes_.size());
        it = children.insert(it, {b, child});
        nodes_.emplace_back();  // may reallocate: `children` is not used after this
        node = child;
      } else {
        node = it->second;
      }
    }
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int64_t>(token);  // first wins
  }

  // The longest token starting at `pos`: {index into Impl::added, byte length}, or {-1, 0}.
  std::pair<int64_t, size_t> longest_at(std::string_view s, size_t pos) const {
    std::pair<int64_t, size_t> best{-1, 0};
    int32_t node = 0;
    for (size_t i = pos; i < s.size(); ++i) {
      const auto& children = nodes_[node].children;
      const unsigned char b = static_cast<unsigned char>(s[i]);
      const auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(b, int32_t{-1}));
      if (it == children.end() || it->first != b) break;
      node = it->second;
      if (nodes_[node].token >= 0) best = {nodes_[node].token, i + 1 - pos};
    }
    return best;
  }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int64_t token = -1;
  };
  std::vector<Node> nodes_ = std::vector<Node>(1);
};

// A piece of the input on its way through the pipeline: text not yet tokenized, or an added
// token already resolved to its id.
struct Segment {
  std::string text;
  int32_t id = -1;
};

bool starts_with_word(std::string_view s) {
  char32_t cp = 0;
  return decode_utf8_at(s, 0, cp) > 0 && is_word_char(cp);
}

// Byte index where the code point ending at `end` starts.
size_t previous_char_start(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
  return start;
}

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  char32_t cp = 0;
  return decode_utf8_at(s, previous_char_start(s, s.size()), cp) > 0 && is_word_char(cp);
}

// Byte index where the trailing whitespace of `s` begins.
size_t trailing_whitespace_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    const size_t start = previous_char_start(s, end);
    char32_t cp = 0;
    if (decode_utf8_at(s, start, cp) == 0 || !is_unicode_whitespace(cp)) break;
    end = start;
  }
  return end;
}

// Byte length of the leading whitespace of `s`.
size_t leading_whitespace_length(std::string_view s) {
  size_t pos = 0;
  char32_t cp = 0;
  while (size_t n = decode_utf8_at(s, pos, cp)) {
    if (!is_unicode_whitespace(cp)) break;
    pos += n;
  }
  return pos;
}

}  // namespace

struct Tokenizer::Impl {
  std::string source;
  std::optional<NormalForm> normal_form;
  std::optional<SplitPattern> split;     // the Split pre-tokenizer, if any
  bool byte_level_use_regex = false;     // ByteLevel splits with the GPT-2 pattern itself
  bool byte_level_add_prefix_space = false;
  bool byte_level_decoder = false;

  std::unordered_map<std::string, int32_t> vocab;  // model tokens
  std::vector<std::string> id_to_token;             // model and added tokens
  std::vector<uint8_t> id_is_special;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // pair -> (rank, new id)
  std::array<int32_t, 256> byte_token{};  // id of each byte's one-character token, or -1
  std::array<std::string, 256> byte_char;  // UTF-8 of each byte's character
  bool ignore_merges = false;
  std::optional<int32_t> unk_id;
  bool fuse_unk = false;

  std::vector<AddedToken> added;
  AddedTokenMatcher raw_matcher, normalized_matcher;
  std::vector<int32_t> template_prefix, template_suffix;

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringViewHash, std::equal_to<>> cache;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw InputError(fmt::format("tokenizer {}: {}: {}", source, field, what));
  }

  void load(const json& root);
  void load_normalizer(const json& node);
  void load_pre_tokenizer(const json& node);
  void load_byte_level(const json& node, const std::string& field, bool alone);
  void load_model(const json& node);
  void load_added_tokens(const json& node);
  void load_post_processor(const json& node, const std::string& field);
  void load_decoder(const json& node);

  void split_added(std::vector<Segment>& segments, const AddedTokenMatcher& matcher,
                   bool parse_special, bool normalize_first) const;
  void bpe_piece(std::string_view piece, std::vector<int32_t>& out) const;
  void bpe_merge(std::string_view piece, std::vector<int32_t>& out) const;
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  void append_token_bytes(int32_t id, std::string& out) const;
};

// ---------------------------------------------------------------------------------------------
// Loading

namespace {

bool json_bool(const json& node, const char* key, bool fallback) {
  if (!node.contains(key) || node[key].is_null()) return fallback;
  return node[key].is_boolean() ? node[key].get<bool>() : fallback;
}

std::string json_type(const json& node) {
  if (!node.is_object() || !node.contains("type") || !node["type"].is_string()) return "";
  return node["type"].get<std::string>();
}

}  // namespace

void Tokenizer::Impl::load(const json& root) {
  if (!root.is_object()) fail("(top level)", "not a JSON object");
  // Every top-level key tokenizers writes, each either implemented or refused: truncation and
  // padding change what encode returns (cut or padded ids), which crl's encode never does, so
  // only null (what Qwen2 and Llama 3 ship) is accepted.
  for (const auto& [key, value] : root.items()) {
    if (key == "version" || key == "model" || key == "normalizer" || key == "pre_tokenizer" ||
        key == "post_processor" || key == "decoder" || key == "added_tokens") {
      continue;
    }
    if (key == "truncation" || key == "padding") {
      if (!value.is_null()) fail(key, "must be null (crl's encode neither truncates nor pads)");
      continue;
    }
    fail(key, "unknown top-level field (crl refuses what it does not implement)");
  }
  if (!root.contains("model")) fail("model", "missing");
  load_model(root["model"]);
  load_normalizer(root.contains("normalizer") ? root["normalizer"] : json());
  load_added_tokens(root.contains("added_tokens") ? root["added_tokens"] : json::array());
  load_pre_tokenizer(root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json());
  load_post_processor(root.contains("post_processor") ? root["post_processor"] : json(),
                      "post_processor");
  load_decoder(root.contains("decoder") ? root["decoder"] : json());
  // Matchers: the patterns of normalised tokens are their normalised text.
  for (size_t i = 0; i < added.size(); ++i) {
    if (added[i].normalized) {
      normalized_matcher.add(added[i].content, i);
    } else {
      raw_matcher.add(added[i].content, i);
    }
  }
}

void Tokenizer::Impl::load_normalizer(const json& node) {
  if (node.is_null()) return;
  std::string type = json_type(node);
  const json* n = &node;
  if (type == "Sequence") {
    if (!node.contains("normalizers") || !node["normalizers"].is_array()) {
      fail("normalizer.normalizers", "missing or not an array");
    }
    if (node["normalizers"].empty()) return;
    if (node["normalizers"].size() != 1) {
      fail("normalizer", "a Sequence of more than one normaliser is not supported");
    }
    n = &node["normalizers"][0];
    type = json_type(*n);
  }
  if (type == "NFC") normal_form = NormalForm::NFC;
  else if (type == "NFD") normal_form = NormalForm::NFD;
  else if (type == "NFKC") normal_form = NormalForm::NFKC;
  else if (type == "NFKD") normal_form = NormalForm::NFKD;
  else fail("normalizer.type", fmt::format("'{}' is not supported (NFC, NFD, NFKC, NFKD are)", type));
}

void Tokenizer::Impl::load_byte_level(const json& node, const std::string& field, bool alone) {
  byte_level_add_prefix_space = json_bool(node, "add_prefix_space", false);
  byte_level_use_regex = json_bool(node, "use_regex", true);
  if (byte_level_use_regex && split) {
    fail(field, "ByteLevel with use_regex after a Split is not supported");
  }
  if (!byte_level_use_regex && alone) {
    // Valid, but then the whole input is one piece; nothing in use ships that.
    fail(field, "ByteLevel with use_regex false and no Split before it is not supported");
  }
}

void Tokenizer::Impl::load_pre_tokenizer(const json& node) {
  if (node.is_null()) fail("pre_tokenizer", "missing: a byte-level BPE needs ByteLevel");
  const std::string type = json_type(node);
  if (type == "ByteLevel") {
    load_byte_level(node, "pre_tokenizer", true);
    return;
  }
  if (type != "Sequence") fail("pre_tokenizer.type", fmt::format("'{}' is not supported", type));
  if (!node.contains("pretokenizers") || !node["pretokenizers"].is_array()) {
    fail("pre_tokenizer.pretokenizers", "missing or not an array");
  }
  const json& list = node["pretokenizers"];
  bool have_byte_level = false;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string field = fmt::format("pre_tokenizer.pretokenizers[{}]", i);
    const std::string t = json_type(list[i]);
    if (have_byte_level) fail(field, "nothing may follow ByteLevel");
    if (t == "Split") {
      if (split) fail(field, "only one Split is supported");
      const json& s = list[i];
      if (!s.contains("pattern") || !s["pattern"].is_object() || !s["pattern"].contains("Regex") ||
          !s["pattern"]["Regex"].is_string()) {
        fail(field + ".pattern", "must be {\"Regex\": \"...\"}");
      }
      const std::string regex = s["pattern"]["Regex"].get<std::string>();
      split = split_pattern_from_regex(regex);
      if (!split) {
        fail(field + ".pattern.Regex",
             fmt::format("'{}' is not one of the implemented patterns (GPT-2, Llama 3, Qwen2)",
                         regex));
      }
      if (!s.contains("behavior") || s["behavior"] != "Isolated") {
        fail(field + ".behavior", "only \"Isolated\" is supported");
      }
      if (json_bool(s, "invert", false)) fail(field + ".invert", "only false is supported");
    } else if (t == "ByteLevel") {
      load_byte_level(list[i], field, !split);
      have_byte_level = true;
    } else {
      fail(field + ".type", fmt::format("'{}' is not supported", t));
    }
  }
  if (!have_byte_level) fail("pre_tokenizer", "no ByteLevel pre-tokenizer: not a byte-level BPE");
}

void Tokenizer::Impl::load_model(const json& node) {
  if (!node.is_object()) fail("model", "not an object");
  if (node.contains("type") && json_type(node) != "BPE") {
    fail("model.type", fmt::format("'{}' is not supported (BPE is)", json_type(node)));
  }
  if (json_bool(node, "byte_fallback", false)) fail("model.byte_fallback", "true is not supported");
  if (node.contains("dropout") && !node["dropout"].is_null() &&
      !(node["dropout"].is_number() && node["dropout"].get<double>() == 0.0)) {
    fail("model.dropout", "BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (node.contains(key) && !node[key].is_null() &&
        !(node[key].is_string() && node[key].get<std::string>().empty())) {
      fail(fmt::format("model.{}", key), "not supported");
    }
  }
  ignore_merges = json_bool(node, "ignore_merges", false);
  fuse_unk = json_bool(node, "fuse_unk", false);
  if (!node.contains("vocab") || !node["vocab"].is_object()) fail("model.vocab", "missing or not an object");
  // The vocabulary is dense (ids 0..n-1 for n entries), so an id of n or more is refused before
  // anything is sized by it.
  const json& vocab_node = node["vocab"];
  if (vocab_node.size() > static_cast<size_t>(kMaxTokens)) {
    fail("model.vocab", fmt::format("{} entries are above crl's limit of {}", vocab_node.size(), kMaxTokens));
  }
  const int64_t entries = static_cast<int64_t>(vocab_node.size());
  for (const auto& [token, id] : vocab_node.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= entries) {
      fail("model.vocab", fmt::format("token '{}' has id {}, not an integer in [0, {}) (the vocabulary is dense: "
                                      "ids run from 0 to its number of entries)",
                                      token, id.dump(), entries));
    }
    vocab[token] = id.get<int32_t>();
  }
  id_to_token.assign(static_cast<size_t>(entries), std::string());
  std::vector<uint8_t> seen(id_to_token.size(), 0);
  for (const auto& [token, id] : vocab) {
    if (seen[id]) fail("model.vocab", fmt::format("id {} is given to two tokens", id));
    seen[id] = 1;
    id_to_token[id] = token;
  }
  if (node.contains("unk_token") && node["unk_token"].is_string()) {
    const auto it = vocab.find(node["unk_token"].get<std::string>());
    if (it == vocab.end()) fail("model.unk_token", "not in the vocabulary");
    unk_id = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    byte_char[b].clear();
    append_utf8(byte_char[b], byte_to_unicode(static_cast<uint8_t>(b)));
    const auto it = vocab.find(byte_char[b]);
    byte_token[b] = it == vocab.end() ? -1 : it->second;
  }
  if (!node.contains("merges") || !node["merges"].is_array()) fail("model.merges", "missing or not an array");
  const json& list = node["merges"];
  merges.reserve(list.size() * 2);
  for (size_t rank = 0; rank < list.size(); ++rank) {
    const json& m = list[rank];
    std::string left, right;
    if (m.is_string()) {
      const std::string text = m.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        fail(fmt::format("model.merges[{}]", rank), fmt::format("'{}' is not \"left right\"", text));
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      fail(fmt::format("model.merges[{}]", rank), "neither \"left right\" nor [\"left\", \"right\"]");
    }
    const auto l = vocab.find(left), r = vocab.find(right), merged = vocab.find(left + right);
    if (l == vocab.end() || r == vocab.end() || merged == vocab.end()) {
      fail(fmt::format("model.merges[{}]", rank),
           fmt::format("'{}' + '{}' uses a token not in the vocabulary", left, right));
    }
    // The first occurrence of a pair wins, as in the reference.
    merges.emplace(pair_key(l->second, r->second),
                   std::make_pair(static_cast<int32_t>(rank), merged->second));
  }
}

void Tokenizer::Impl::load_added_tokens(const json& node) {
  if (!node.is_array()) fail("added_tokens", "not an array");
  // Added tokens extend the dense vocabulary (or repeat an id of it): every id lies below the
  // number of vocabulary entries plus added tokens.
  const int64_t id_limit = static_cast<int64_t>(id_to_token.size()) + static_cast<int64_t>(node.size());
  if (id_limit > kMaxTokens) fail("added_tokens", fmt::format("more than crl's limit of {} tokens in all", kMaxTokens));
  for (size_t i = 0; i < node.size(); ++i) {
    const json& t = node[i];
    const std::string field = fmt::format("added_tokens[{}]", i);
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        t["id"].get<int64_t>() < 0 || t["id"].get<int64_t>() >= id_limit) {
      fail(field + ".id", fmt::format("missing or not an integer in [0, {}) (the vocabulary's entries plus the "
                                      "added tokens)",
                                      id_limit));
    }
    if (!t.contains("content") || !t["content"].is_string() || t["content"].get<std::string>().empty()) {
      fail(field + ".content", "missing or empty");
    }
    AddedToken token;
    token.id = t["id"].get<int32_t>();
    token.content = t["content"].get<std::string>();
    if (!is_valid_utf8(token.content)) fail(field + ".content", "not valid UTF-8");
    token.special = json_bool(t, "special", false);
    token.single_word = json_bool(t, "single_word", false);
    token.lstrip = json_bool(t, "lstrip", false);
    token.rstrip = json_bool(t, "rstrip", false);
    token.normalized = json_bool(t, "normalized", !token.special);
    if (static_cast<size_t>(token.id) >= id_to_token.size()) {
      id_to_token.resize(static_cast<size_t>(token.id) + 1);
    }
    const std::string& existing = id_to_token[token.id];
    if (!existing.empty() && existing != token.content) {
      fail(field, fmt::format("id {} is '{}' in the vocabulary but '{}' here", token.id, existing,
                              token.content));
    }
    // A normalised token is matched, and decoded, as its normalised text (the reference keeps
    // only that form: id_to_token of "cafe\u0301" under NFC gives "caf\u00e9").
    if (token.normalized && normal_form) token.content = normalize(token.content, *normal_form);
    id_to_token[token.id] = token.content;
    added.push_back(std::move(token));
  }
  id_is_special.assign(id_to_token.size(), 0);
  for (const auto& t : added) id_is_special[t.id] = t.special ? 1 : 0;
}

void Tokenizer::Impl::load_post_processor(const json& node, const std::string& field) {
  if (node.is_null()) return;
  const std::string type = json_type(node);
  if (type == "ByteLevel") return;  // only adjusts offsets, which crl does not report
  if (type == "Sequence") {
    if (!node.contains("processors") || !node["processors"].is_array()) {
      fail(field + ".processors", "missing or not an array");
    }
    for (size_t i = 0; i < node["processors"].size(); ++i) {
      load_post_processor(node["processors"][i], fmt::format("{}.processors[{}]", field, i));
    }
    return;
  }
  if (type != "TemplateProcessing") {
    fail(field + ".type", fmt::format("'{}' is not supported (ByteLevel, TemplateProcessing, "
                                      "Sequence are)", type));
  }
  if (!template_prefix.empty() || !template_suffix.empty()) fail(field, "two templates");
  if (!node.contains("single") || !node["single"].is_array()) fail(field + ".single", "missing");
  const json specials = node.contains("special_tokens") ? node["special_tokens"] : json::object();
  bool after_sequence = false;
  for (const auto& item : node["single"]) {
    if (item.contains("Sequence")) {
      if (after_sequence) fail(field + ".single", "the sequence appears twice");
      after_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id")) {
      fail(field + ".single", fmt::format("unexpected item {}", item.dump()));
    }
    const std::string name = item["SpecialToken"]["id"].get<std::string>();
    if (!specials.contains(name) || !specials[name].contains("ids") ||
        !specials[name]["ids"].is_array()) {
      fail(field + ".special_tokens", fmt::format("'{}' is used but not defined", name));
    }
    for (const auto& id : specials[name]["ids"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() >= static_cast<int64_t>(id_to_token.size()) || id_to_token[id.get<size_t>()].empty()) {
        fail(field + ".special_tokens", fmt::format("'{}' has id {}, which is not a token of this tokenizer", name,
                                                    id.dump()));
      }
      (after_sequence ? template_suffix : template_prefix).push_back(id.get<int32_t>());
    }
  }
}

void Tokenizer::Impl::load_decoder(const json& node) {
  const std::string type = json_type(node);
  if (type == "ByteLevel") {
    byte_level_decoder = true;
  } else if (type == "Sequence" && node.contains("decoders") && node["decoders"].is_array() &&
             node["decoders"].size() == 1 && json_type(node["decoders"][0]) == "ByteLevel") {
    byte_level_decoder = true;
  } else {
    fail("decoder", fmt::format("'{}' is not supported (ByteLevel is)", node.is_null() ? "null" : type));
  }
}

// ---------------------------------------------------------------------------------------------
// Encoding

// Splits the text segments on added tokens, as AddedVocabulary::find_matches does (including its
// lstrip/rstrip/single_word rules); normalize_first normalises each text segment beforehand.
void Tokenizer::Impl::split_added(std::vector<Segment>& segments, const AddedTokenMatcher& matcher,
                                  bool parse_special, bool normalize_first) const {
  std::vector<Segment> out;
  for (auto& seg : segments) {
    if (seg.id >= 0) {
      out.push_back(std::move(seg));
      continue;
    }
    if (normalize_first && normal_form) seg.text = normalize(seg.text, *normal_form);
    if (matcher.empty()) {
      out.push_back(std::move(seg));
      continue;
    }
    const std::string_view s = seg.text;
    size_t start_offset = 0, pos = 0;
    while (pos < s.size()) {
      const auto [found, length] = matcher.longest_at(s, pos);
      if (found < 0) {
        ++pos;
        continue;
      }
      const AddedToken& token = added[static_cast<size_t>(found)];
      size_t start = pos, stop = pos + length;
      pos = stop;
      if (token.special && !parse_special) continue;
      if (token.single_word) {
        const bool start_space = start == 0 || !ends_with_word(s.substr(0, start));
        const bool stop_space = stop == s.size() || !starts_with_word(s.substr(stop));
        if (!start_space || !stop_space) continue;
      }
      if (token.lstrip) start = std::max(trailing_whitespace_start(s.substr(0, start)), start_offset);
      if (token.rstrip) stop += leading_whitespace_length(s.substr(stop));
      if (start > start_offset) out.push_back({std::string(s.substr(start_offset, start - start_offset)), -1});
      out.push_back({std::string(), token.id});
      start_offset = stop;
    }
    if (start_offset < s.size() || s.empty()) {
      out.push_back({std::string(s.substr(std::min(start_offset, s.size()))), -1});
    }
  }
  segments = std::move(out);
}

// BPE merges of one piece: lowest rank first, leftmost on ties, as the reference's priority
// queue does.
void Tokenizer::Impl::bpe_merge(std::string_view piece, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, new_id;
    bool operator<(const Candidate& o) const {  // reversed: std::priority_queue is a max-heap
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  for (unsigned char b : piece) {
    int32_t id = byte_token[b];
    if (id < 0) {
      if (!unk_id) continue;  // as the reference does without an unk token: dropped
      if (fuse_unk && !symbols.empty() && symbols.back().id == *unk_id) continue;
      id = *unk_id;
    }
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;
  std::priority_queue<Candidate> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    const auto it = merges.find(pair_key(symbols[i].id, symbols[i + 1].id));
    if (it != merges.end()) queue.push({it->second.first, static_cast<int32_t>(i), it->second.second});
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const auto it = merges.find(pair_key(left.id, right.id));
    if (it == merges.end() || it->second.second != top.new_id) continue;  // stale entry
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) {
      const auto p = merges.find(pair_key(symbols[left.prev].id, left.id));
      if (p != merges.end()) queue.push({p->second.first, left.prev, p->second.second});
    }
    if (left.next >= 0) {
      const auto n = merges.find(pair_key(left.id, symbols[left.next].id));
      if (n != merges.end()) queue.push({n->second.first, top.pos, n->second.second});
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

void Tokenizer::Impl::bpe_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    const auto it = cache.find(piece);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  bool whole = false;
  if (ignore_merges) {
    std::string mapped;
    for (unsigned char b : piece) mapped += byte_char[b];
    const auto it = vocab.find(mapped);
    if (it != vocab.end()) {
      ids.push_back(it->second);
      whole = true;
    }
  }
  if (!whole) bpe_merge(piece, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() >= kCacheCapacity) cache.clear();
    cache.emplace(std::string(piece), std::move(ids));
  }
}

void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  thread_local std::vector<ByteRange> split_pieces, pieces;
  split_pieces.clear();
  if (split) {
    split_pretokens(text, *split, split_pieces);
  } else if (!text.empty()) {
    split_pieces.emplace_back(0, static_cast<uint32_t>(text.size()));
  }
  std::string prefixed;
  for (const auto& [begin, end] : split_pieces) {
    std::string_view piece = text.substr(begin, end - begin);
    if (byte_level_add_prefix_space && (piece.empty() || piece[0] != ' ')) {
      prefixed = " ";
      prefixed += piece;
      piece = prefixed;
    }
    if (byte_level_use_regex) {
      pieces.clear();
      split_pretokens(piece, SplitPattern::Gpt2, pieces);
      for (const auto& [b, e] : pieces) bpe_piece(piece.substr(b, e - b), out);
    } else {
      bpe_piece(piece, out);
    }
  }
}

void Tokenizer::Impl::append_token_bytes(int32_t id, std::string& out) const {
  const std::string& token = id_to_token[id];
  if (!byte_level_decoder) {
    out += token;
    return;
  }
  // A token whose characters are all in the byte-level alphabet becomes those bytes; any other
  // token (an added token such as "<|im_start|>" written with other characters) stays as it is.
  const size_t before = out.size();
  for (const CodePoint& c : decode_utf8(token)) {
    const int b = unicode_to_byte(c.value);
    if (b < 0) {
      out.resize(before);
      out += token;
      return;
    }
    out += static_cast<char>(b);
  }
}

// ---------------------------------------------------------------------------------------------
// Public interface

Tokenizer::Tokenizer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  const std::filesystem::path file =
      std::filesystem::is_directory(path) ? path / "tokenizer.json" : path;
  return from_json(read_file(file, "tokenizer"), file.string());
}

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source) {
  auto impl = std::make_shared<Impl>();
  impl->source = source;
  const json root = parse_json_bounded(json_text, fmt::format("tokenizer {}", source));
  try {
    impl->load(root);
  } catch (const json::exception& e) {
    // A field of the wrong JSON type somewhere the checks above did not look.
    throw InputError(fmt::format("tokenizer {}: unexpected JSON: {}", source, e.what()));
  }
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                       bool parse_special_tokens) const {
  if (!is_valid_utf8(text)) decode_utf8(text);  // throws, naming the byte offset
  std::vector<Segment> segments;
  segments.push_back({std::string(text), -1});
  impl_->split_added(segments, impl_->raw_matcher, parse_special_tokens, false);
  impl_->split_added(segments, impl_->normalized_matcher, parse_special_tokens, true);
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = impl_->template_prefix;
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
    } else {
      impl_->encode_text(seg.text, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), impl_->template_suffix.begin(), impl_->template_suffix.end());
  return ids;
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token.size() ||
        impl_->id_to_token[id].empty()) {
      throw InputError(fmt::format("tokenizer {}: cannot decode unknown id {}", impl_->source, id));
    }
    if (skip_special_tokens && impl_->id_is_special[id]) continue;
    impl_->append_token_bytes(id, out);
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return utf8_lossy(decode_bytes(ids, skip_special_tokens));
}

std::string Tokenizer::decode_sampled(std::span<const int64_t> ids, bool skip_special_tokens) const {
  std::vector<int32_t> known;
  known.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id >= static_cast<int64_t>(impl_->id_to_token.size())) continue;  // a padding row of the embedding
    known.push_back(id < 0 ? -1 : static_cast<int32_t>(id));
  }
  return decode(known, skip_special_tokens);
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_to_token.size()); }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const auto& t : impl_->added) {
    if (t.content == token) return t.id;
  }
  const auto it = impl_->vocab.find(std::string(token));
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}

const std::string& Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token.size() ||
      impl_->id_to_token[id].empty()) {
    throw InputError(fmt::format("tokenizer {}: unknown id {}", impl_->source, id));
  }
  return impl_->id_to_token[id];
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->id_is_special.size() && impl_->id_is_special[id];
}

SplitPattern Tokenizer::split_pattern() const {
  return impl_->split ? *impl_->split : SplitPattern::Gpt2;
}

size_t Tokenizer::cache_size() const {
  std::lock_guard<std::mutex> lock(impl_->cache_mutex);
  return impl_->cache.size();
}

}  // namespace crl::policy
