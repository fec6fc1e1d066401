// Unicode helpers for the tokenizer; see unicode.h. Categories and normalisation come from
// utf8proc; UTF-8 validation follows the Unicode standard's table of well-formed sequences.
#include "policy/unicode.h"

#include <utf8proc.h>

#include <array>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"

namespace crl::policy {
namespace {

// Well-formed UTF-8 (Unicode Table 3-7). Returns the sequence length at `pos` if well formed
// (and stores the code point), otherwise minus the length of the maximal ill-formed subpart.
int utf8_step(std::string_view s, size_t pos, char32_t& cp) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t b0 = byte(pos);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  int length;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  char32_t value = b0 & (0x7F >> length);
  for (int i = 1; i < length; ++i) {
    if (pos + i >= s.size()) return -i;
    const uint8_t b = byte(pos + i);
    const uint8_t min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) return -i;
    value = (value << 6) | (b & 0x3F);
  }
  cp = value;
  return length;
}

std::array<int, 0x180> make_unicode_to_byte() {
  std::array<int, 0x180> table{};
  table.fill(-1);
  for (int b = 0; b < 256; ++b) table[byte_to_unicode(static_cast<uint8_t>(b))] = b;
  return table;
}

std::array<char32_t, 256> make_byte_to_unicode() {
  std::array<char32_t, 256> table{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    table[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return table;
}

}  // namespace

bool is_unicode_whitespace(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

CharClass char_class(char32_t cp) {
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return CharClass::Letter;
    if (cp >= '0' && cp <= '9') return CharClass::Number;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return CharClass::Whitespace;
    return CharClass::Other;
  }
  if (is_unicode_whitespace(cp)) return CharClass::Whitespace;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
      return CharClass::Letter;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return CharClass::Number;
    default:
      return CharClass::Other;
  }
}

bool is_word_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
           cp == '_';
  }
  if (cp == 0x200C || cp == 0x200D) return true;
  if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
      (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189)) {
    return true;
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

std::vector<CodePoint> decode_utf8(std::string_view text) {
  std::vector<CodePoint> out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = 0;
    const int n = utf8_step(text, pos, cp);
    if (n < 0) {
      throw InputError(fmt::format("text is not valid UTF-8: malformed sequence at byte {}", pos));
    }
    out.push_back({cp, static_cast<uint32_t>(pos)});
    pos += static_cast<size_t>(n);
  }
  return out;
}

bool is_valid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = 0;
    const int n = utf8_step(text, pos, cp);
    if (n < 0) return false;
    pos += static_cast<size_t>(n);
  }
  return true;
}

size_t decode_utf8_at(std::string_view text, size_t pos, char32_t& cp) {
  if (pos >= text.size()) return 0;
  const int n = utf8_step(text, pos, cp);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    char32_t cp = 0;
    const int n = utf8_step(bytes, pos, cp);
    if (n > 0) {
      out.append(bytes.substr(pos, static_cast<size_t>(n)));
      pos += static_cast<size_t>(n);
    } else {
      out += "\xEF\xBF\xBD";
      pos += static_cast<size_t>(-n);
    }
  }
  return out;
}

namespace {

std::string normalize_all(std::string_view text, NormalForm form);

// True when the code point starting at byte `pos` is below U+0300: such characters are starters
// that are NFC_Quick_Check=Yes and compose with nothing before them, so NFC of a text equals the
// concatenation of NFC of the parts when it is cut just before one of them.
bool is_nfc_boundary(std::string_view s, size_t pos) {
  const uint8_t b = static_cast<uint8_t>(s[pos]);
  return b < 0x80 || (b >= 0xC2 && b < 0xCC);
}

// NFC that runs utf8proc only over the stretches that hold a character from U+0300 up (with the
// character before each, which a combining mark may compose with); source code, which is nearly
// all ASCII, is then copied rather than decomposed and recomposed.
std::string nfc_by_stretches(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t done = 0, pos = 0;
  while (pos < text.size()) {
    if (is_nfc_boundary(text, pos)) {
      pos += static_cast<uint8_t>(text[pos]) < 0x80 ? 1 : 2;
      continue;
    }
    // Start the stretch at the last boundary before pos (the previous character's start).
    size_t start = pos;
    if (start > done) {
      size_t prev = start - 1;
      while (prev > done && (static_cast<uint8_t>(text[prev]) & 0xC0) == 0x80) --prev;
      start = prev;
    }
    size_t end = pos;
    while (end < text.size() && !is_nfc_boundary(text, end)) ++end;
    out.append(text.substr(done, start - done));
    out += normalize_all(text.substr(start, end - start), NormalForm::NFC);
    done = pos = end;
  }
  out.append(text.substr(done));
  return out;
}

}  // namespace

std::string normalize(std::string_view text, NormalForm form) {
  bool ascii = true;
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return std::string(text);  // every normal form of ASCII is itself
  if (form == NormalForm::NFC) return nfc_by_stretches(text);
  return normalize_all(text, form);
}

namespace {

std::string normalize_all(std::string_view text, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &result,
                   static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(result, &std::free);
  if (n < 0) {
    throw InputError(fmt::format("cannot normalise text: {}", utf8proc_errmsg(n)));
  }
  return std::string(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
}

}  // namespace

char32_t byte_to_unicode(uint8_t byte) {
  static const std::array<char32_t, 256> table = make_byte_to_unicode();
  return table[byte];
}

int unicode_to_byte(char32_t cp) {
  static const std::array<int, 0x180> table = make_unicode_to_byte();
  return cp < table.size() ? table[cp] : -1;
}

}  // namespace crl::policy
