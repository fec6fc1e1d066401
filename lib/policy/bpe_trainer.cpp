// Byte-level BPE training; see bpe_trainer.h.
#include "policy/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/atomic_file.h"
#include "policy/unicode.h"

namespace crl::policy {
namespace {

using nlohmann::ordered_json;

uint64_t pack_pair(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
int32_t pair_left(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t pair_right(uint64_t key) { return static_cast<int32_t>(key & 0xffffffffu); }

// The corpus with special tokens' text cut out: the pieces between them.
std::vector<std::string_view> cut_special_tokens(std::string_view text,
                                                 const std::vector<std::string>& specials) {
  std::vector<std::string_view> out;
  size_t start = 0, pos = 0;
  while (pos < text.size()) {
    size_t best = 0;
    for (const auto& s : specials) {
      if (s.size() > best && text.compare(pos, s.size(), s) == 0) best = s.size();
    }
    if (best == 0) {
      ++pos;
      continue;
    }
    if (pos > start) out.push_back(text.substr(start, pos - start));
    pos += best;
    start = pos;
  }
  if (start < text.size()) out.push_back(text.substr(start));
  return out;
}

struct QueueEntry {
  int64_t count;
  uint64_t pair;
  // Max-heap order: higher count first, then the smaller pair (left id, then right id).
  bool operator<(const QueueEntry& o) const {
    if (count != o.count) return count < o.count;
    return pair > o.pair;
  }
};

}  // namespace

BpeTrainingResult train_byte_level_bpe(std::string_view corpus, const BpeTrainerOptions& options) {
  std::set<std::string> unique_specials;
  for (const auto& s : options.special_tokens) {
    if (s.empty()) throw InputError("BPE trainer: a special token is empty");
    if (!is_valid_utf8(s)) throw InputError(fmt::format("BPE trainer: special token '{}' is not UTF-8", s));
    if (!unique_specials.insert(s).second) {
      throw InputError(fmt::format("BPE trainer: special token '{}' is listed twice", s));
    }
  }
  const int32_t base = static_cast<int32_t>(options.special_tokens.size()) + 256;
  if (options.vocab_size < base) {
    throw InputError(fmt::format("BPE trainer: vocab_size {} is below the {} special and 256 byte "
                                 "tokens",
                                 options.vocab_size, options.special_tokens.size()));
  }
  if (options.min_frequency < 1) throw InputError("BPE trainer: min_frequency must be at least 1");
  if (!is_valid_utf8(corpus)) decode_utf8(corpus);  // throws, naming the byte offset

  // Tokens: special tokens, then the 256 byte characters in code point order (as HF does).
  std::vector<std::string> tokens(options.special_tokens.begin(), options.special_tokens.end());
  std::vector<std::pair<char32_t, int>> alphabet;
  for (int b = 0; b < 256; ++b) alphabet.emplace_back(byte_to_unicode(static_cast<uint8_t>(b)), b);
  std::sort(alphabet.begin(), alphabet.end());
  std::array<int32_t, 256> byte_id{};
  for (const auto& [cp, b] : alphabet) {
    byte_id[b] = static_cast<int32_t>(tokens.size());
    std::string s;
    append_utf8(s, cp);
    tokens.push_back(std::move(s));
  }
  std::unordered_map<std::string, int32_t> token_id;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!token_id.emplace(tokens[i], static_cast<int32_t>(i)).second) {
      throw InputError(fmt::format("BPE trainer: special token '{}' is also a byte token", tokens[i]));
    }
  }

  // Word counts over the pre-tokenized, normalised corpus.
  std::unordered_map<std::string, int64_t> word_counts;
  {
    const std::string normalized = options.nfc ? normalize(corpus, NormalForm::NFC) : std::string(corpus);
    std::vector<ByteRange> ranges;
    for (std::string_view segment : cut_special_tokens(normalized, options.special_tokens)) {
      ranges.clear();
      split_pretokens(segment, options.pattern, ranges);
      for (const auto& [b, e] : ranges) ++word_counts[std::string(segment.substr(b, e - b))];
    }
  }
  // Sorted so that ids of words, hence every tie below, do not depend on hash order.
  std::vector<std::pair<std::string, int64_t>> sorted_words(word_counts.begin(), word_counts.end());
  std::sort(sorted_words.begin(), sorted_words.end());
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  for (const auto& [w, c] : sorted_words) {
    std::vector<int32_t> symbols;
    for (unsigned char ch : w) symbols.push_back(byte_id[ch]);
    words.push_back(std::move(symbols));
    counts.push_back(c);
  }

  std::unordered_map<uint64_t, int64_t> pair_counts;
  std::unordered_map<uint64_t, std::vector<int32_t>> pair_words;  // may hold stale or repeated ids
  for (size_t w = 0; w < words.size(); ++w) {
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const uint64_t key = pack_pair(words[w][i], words[w][i + 1]);
      pair_counts[key] += counts[w];
      pair_words[key].push_back(static_cast<int32_t>(w));
    }
  }
  std::priority_queue<QueueEntry> queue;
  for (const auto& [key, count] : pair_counts) {
    if (count > 0) queue.push({count, key});
  }

  std::vector<std::pair<std::string, std::string>> merges;
  std::unordered_set<int32_t> touched;
  std::unordered_map<uint64_t, int64_t> new_pairs;
  while (static_cast<int32_t>(token_id.size()) < options.vocab_size && !queue.empty()) {
    QueueEntry top = queue.top();
    queue.pop();
    const auto current = pair_counts.find(top.pair);
    const int64_t now = current == pair_counts.end() ? 0 : current->second;
    if (now != top.count) {  // stale: counts only fall for pairs already queued
      if (now > 0) queue.push({now, top.pair});
      continue;
    }
    if (top.count < options.min_frequency) break;
    const int32_t left = pair_left(top.pair), right = pair_right(top.pair);
    const std::string merged = tokens[left] + tokens[right];
    int32_t new_id;
    if (const auto it = token_id.find(merged); it != token_id.end()) {
      new_id = it->second;  // another pair already made this string
    } else {
      new_id = static_cast<int32_t>(tokens.size());
      tokens.push_back(merged);
      token_id.emplace(merged, new_id);
    }
    merges.emplace_back(tokens[left], tokens[right]);

    touched.clear();
    new_pairs.clear();
    std::vector<int32_t> affected = std::move(pair_words[top.pair]);
    pair_words.erase(top.pair);
    for (int32_t w : affected) {
      if (!touched.insert(w).second) continue;
      auto& symbols = words[w];
      bool present = false;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        if (symbols[i] == left && symbols[i + 1] == right) {
          present = true;
          break;
        }
      }
      if (!present) continue;
      const int64_t c = counts[w];
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pair_counts[pack_pair(symbols[i], symbols[i + 1])] -= c;
      std::vector<int32_t> merged_symbols;
      merged_symbols.reserve(symbols.size());
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          merged_symbols.push_back(new_id);
          ++i;
        } else {
          merged_symbols.push_back(symbols[i]);
        }
      }
      symbols = std::move(merged_symbols);
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const uint64_t key = pack_pair(symbols[i], symbols[i + 1]);
        pair_counts[key] += c;
        if (symbols[i] == new_id || symbols[i + 1] == new_id) {
          pair_words[key].push_back(w);
          new_pairs[key] = pair_counts[key];
        }
      }
    }
    pair_counts.erase(top.pair);
    for (const auto& [key, count] : new_pairs) {
      if (pair_counts[key] > 0) queue.push({pair_counts[key], key});
    }
  }

  // tokenizer.json, in the layout Hugging Face writes.
  ordered_json added = ordered_json::array();
  for (size_t i = 0; i < options.special_tokens.size(); ++i) {
    added.push_back({{"id", i}, {"content", options.special_tokens[i]}, {"single_word", false},
                     {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  ordered_json vocab = ordered_json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  ordered_json merge_list = ordered_json::array();
  for (const auto& [a, b] : merges) merge_list.push_back({a, b});
  const ordered_json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                                   {"trim_offsets", false}, {"use_regex", false}};
  ordered_json root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  root["added_tokens"] = added;
  root["normalizer"] = options.nfc ? ordered_json{{"type", "NFC"}} : ordered_json();
  root["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern", {{"Regex", split_pattern_regex(options.pattern)}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        byte_level}}};
  root["post_processor"] = byte_level;
  root["decoder"] = byte_level;
  root["model"] = {{"type", "BPE"},
                   {"dropout", nullptr},
                   {"unk_token", nullptr},
                   {"continuing_subword_prefix", nullptr},
                   {"end_of_word_suffix", nullptr},
                   {"fuse_unk", false},
                   {"byte_fallback", false},
                   {"ignore_merges", false},
                   {"vocab", vocab},
                   {"merges", merge_list}};
  BpeTrainingResult result;
  result.tokenizer_json = root.dump(2, ' ', false) + "\n";
  result.vocab_size = static_cast<int32_t>(tokens.size());
  result.merges = static_cast<int32_t>(merges.size());
  return result;
}

BpeTrainingResult train_byte_level_bpe_to_file(std::string_view corpus,
                                               const BpeTrainerOptions& options,
                                               const std::filesystem::path& path) {
  BpeTrainingResult result = train_byte_level_bpe(corpus, options);
  write_file_atomically(path, result.tokenizer_json);
  return result;
}

}  // namespace crl::policy
