// The split patterns of byte-level BPE tokenizers (GPT-2, Llama 3, Qwen2), matched by a
// hand-written scanner with exactly the regexes' semantics (Oniguruma: ordered alternation,
// greedy quantifiers with backtracking, Unicode classes), since std::regex knows no \p{L}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crl::policy {

enum class SplitPattern {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  // (ByteLevel with use_regex: true)
  Gpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+
  Llama3,
  // The same as Llama3 with \p{N} (single digits) in place of \p{N}{1,3}.
  Qwen2,
};

// The regex text of a pattern, as tokenizer.json spells it.
const std::string& split_pattern_regex(SplitPattern pattern);
// The pattern a tokenizer.json regex denotes, or nullopt when the scanner does not implement it.
std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex);

// A piece of text as a half-open byte range [begin, end).
using ByteRange = std::pair<uint32_t, uint32_t>;

// Splits valid UTF-8 `text` into the pieces the pattern matches, appended to `out` in order
// (these patterns match every character, so the pieces tile the text). Throws InputError for
// malformed UTF-8.
void split_pretokens(std::string_view text, SplitPattern pattern, std::vector<ByteRange>& out);

}  // namespace crl::policy
