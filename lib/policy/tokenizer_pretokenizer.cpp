// Scanner for the byte-level BPE split patterns; see tokenizer_pretokenizer.h. Each function
// below tries the alternatives of a pattern in order at one position and returns where the
// first one that matches ends, reproducing what the regex engine's backtracking settles on.
#include "policy/tokenizer_pretokenizer.h"

#include "policy/unicode.h"

namespace crl::policy {
namespace {

const std::string kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const std::string kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The decoded text: code points and their classes, plus a sentinel past the end.
struct Scan {
  std::vector<char32_t> cp;
  std::vector<CharClass> cls;
  std::vector<uint32_t> offset;  // byte offset of each code point; offset[n] = text size
  size_t n = 0;

  bool letter(size_t i) const { return i < n && cls[i] == CharClass::Letter; }
  bool number(size_t i) const { return i < n && cls[i] == CharClass::Number; }
  bool space(size_t i) const { return i < n && cls[i] == CharClass::Whitespace; }
  bool other(size_t i) const { return i < n && cls[i] == CharClass::Other; }
  bool newline(size_t i) const { return i < n && (cp[i] == '\r' || cp[i] == '\n'); }
  size_t letters_end(size_t i) const {
    while (letter(i)) ++i;
    return i;
  }
  size_t others_end(size_t i) const {
    while (other(i)) ++i;
    return i;
  }
  size_t spaces_end(size_t i) const {
    while (space(i)) ++i;
    return i;
  }
};

// ASCII case folding plus U+017F LATIN SMALL LETTER LONG S, which folds to 's' in Unicode (the
// only non-ASCII character that folds onto a letter of the contractions).
char32_t fold(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c == 0x17F) return 's';
  return c;
}

// 's|'t|'re|'ve|'m|'ll|'d, case-insensitive or not; returns the end or 0 when none matches.
size_t contraction_end(const Scan& s, size_t i, bool ignore_case) {
  if (s.cp[i] != '\'' || i + 1 >= s.n) return 0;
  const auto at = [&](size_t k) { return ignore_case ? fold(s.cp[k]) : s.cp[k]; };
  const char32_t a = at(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (i + 2 >= s.n) return 0;
  const char32_t b = at(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return 0;
}

// \s+(?!\S)|\s+ at a whitespace character: the whole run if it ends the text or is a single
// character; otherwise all but its last character, which then prefixes the next piece.
size_t whitespace_end(const Scan& s, size_t i) {
  const size_t j = s.spaces_end(i);
  if (j == s.n || j - i == 1) return j;
  return j - 1;
}

size_t gpt2_match(const Scan& s, size_t i) {
  if (size_t e = contraction_end(s, i, false)) return e;
  const size_t k = (s.cp[i] == ' ') ? i + 1 : i;  // the optional leading space
  if (s.letter(k)) return s.letters_end(k);
  if (s.number(k)) {
    size_t j = k;
    while (s.number(j)) ++j;
    return j;
  }
  if (s.other(k)) return s.others_end(k);
  return whitespace_end(s, i);
}

size_t llama3_family_match(const Scan& s, size_t i, size_t max_digits) {
  if (size_t e = contraction_end(s, i, true)) return e;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (s.letter(i)) return s.letters_end(i);
  if (!s.newline(i) && !s.letter(i) && !s.number(i) && s.letter(i + 1)) return s.letters_end(i + 1);
  // \p{N}{1,max}
  if (s.number(i)) {
    size_t j = i;
    while (s.number(j) && j - i < max_digits) ++j;
    return j;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  const size_t k = (s.cp[i] == ' ' && s.other(i + 1)) ? i + 1 : i;
  if (s.other(k)) {
    size_t j = s.others_end(k);
    while (s.newline(j)) ++j;
    return j;
  }
  // \s*[\r\n]+ : up to and including the run's last line break, if it has one.
  const size_t run_end = s.spaces_end(i);
  for (size_t j = run_end; j > i; --j) {
    if (s.newline(j - 1)) return j;
  }
  return whitespace_end(s, i);
}

}  // namespace

const std::string& split_pattern_regex(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::Gpt2: return kGpt2Regex;
    case SplitPattern::Llama3: return kLlama3Regex;
    case SplitPattern::Qwen2: return kQwen2Regex;
  }
  return kQwen2Regex;
}

std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex) {
  if (regex == kGpt2Regex) return SplitPattern::Gpt2;
  if (regex == kLlama3Regex) return SplitPattern::Llama3;
  if (regex == kQwen2Regex) return SplitPattern::Qwen2;
  return std::nullopt;
}

void split_pretokens(std::string_view text, SplitPattern pattern, std::vector<ByteRange>& out) {
  thread_local Scan s;
  s.cp.clear();
  s.cls.clear();
  s.offset.clear();
  for (const CodePoint& c : decode_utf8(text)) {
    s.cp.push_back(c.value);
    s.cls.push_back(char_class(c.value));
    s.offset.push_back(c.byte_offset);
  }
  s.n = s.cp.size();
  s.offset.push_back(static_cast<uint32_t>(text.size()));
  size_t i = 0;
  while (i < s.n) {
    size_t end;
    switch (pattern) {
      case SplitPattern::Gpt2: end = gpt2_match(s, i); break;
      case SplitPattern::Llama3: end = llama3_family_match(s, i, 3); break;
      default: end = llama3_family_match(s, i, 1); break;
    }
    out.emplace_back(s.offset[i], s.offset[end]);
    i = end;
  }
}

}  // namespace crl::policy
