// Table schemas, row batches and the UTF-8 clean-up applied to every stored string.
#include "results/table_schema.h"

#include <fmt/format.h>

#include <cstring>
#include <set>

#include "core/error.h"

namespace crl::results {

std::string_view column_type_name(ColumnType type) {
  switch (type) {
    case ColumnType::int64:
      return "int64";
    case ColumnType::float64:
      return "float64";
    case ColumnType::boolean:
      return "bool";
    case ColumnType::string:
      return "string";
  }
  return "unknown";
}

std::string describe_schema(const TableSchema& schema) {
  std::string out;
  for (const auto& c : schema) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{}:{}", c.name, column_type_name(c.type));
  }
  return out;
}

void check_result_name(std::string_view what, std::string_view name) {
  const auto is_word_char = [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_';
  };
  bool ok = !name.empty() && name.size() <= 64 && !(name[0] >= '0' && name[0] <= '9');
  for (char ch : name) ok = ok && is_word_char(ch);
  if (!ok) {
    throw InputError(fmt::format(
        "bad {} name '{}': use 1 to 64 characters of A-Z a-z 0-9 _, not starting with a digit",
        what, name));
  }
}

void check_schema(std::string_view table, const TableSchema& schema) {
  if (schema.empty()) throw InputError(fmt::format("table '{}' has no columns", table));
  std::set<std::string_view> seen;
  for (const auto& c : schema) {
    check_result_name(fmt::format("column (table '{}')", table), c.name);
    if (!seen.insert(c.name).second) {
      throw InputError(fmt::format("table '{}' names column '{}' twice", table, c.name));
    }
  }
}

RowBatch::RowBatch(TableSchema schema) : schema_(std::move(schema)) {
  columns_.reserve(schema_.size());
  for (const auto& c : schema_) {
    switch (c.type) {
      case ColumnType::int64:
        columns_.emplace_back(std::vector<std::int64_t>{});
        break;
      case ColumnType::float64:
        columns_.emplace_back(std::vector<double>{});
        break;
      case ColumnType::boolean:
        columns_.emplace_back(std::vector<bool>{});
        break;
      case ColumnType::string:
        columns_.emplace_back(std::vector<std::string>{});
        break;
    }
  }
}

void RowBatch::add_row(const std::vector<CellValue>& cells) {
  if (cells.size() != schema_.size()) {
    throw InputError(fmt::format("a row has {} values but the table has {} columns ({})",
                                 cells.size(), schema_.size(), describe_schema(schema_)));
  }
  // Check every cell first, so a bad row leaves the batch as it was.
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const auto want = static_cast<std::size_t>(schema_[i].type);
    if (cells[i].index() != want) {
      throw InputError(fmt::format("column '{}' holds {} but the value given is a {}",
                                   schema_[i].name, column_type_name(schema_[i].type),
                                   column_type_name(static_cast<ColumnType>(cells[i].index()))));
    }
  }
  for (std::size_t i = 0; i < cells.size(); ++i) {
    std::visit(
        [&](auto& values) {
          using Element = typename std::decay_t<decltype(values)>::value_type;
          values.push_back(std::get<Element>(cells[i]));
        },
        columns_[i]);
  }
  ++rows_;
}

namespace {

// Length of the valid UTF-8 sequence (RFC 3629; NUL excluded) starting at text[i], or 0.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b = byte(i);
  std::size_t length = 0;
  unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0x01 && b <= 0x7F) return 1;
  if (b >= 0xC2 && b <= 0xDF) {
    length = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    length = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;  // no UTF-16 surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    length = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

// True when none of the 8 bytes is NUL or has its high bit set (plain ASCII, the common case).
bool eight_ascii_bytes(const char* p) {
  std::uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
  const bool has_high = (word & kHighs) != 0;
  const bool has_zero = ((word - kOnes) & ~word & kHighs) != 0;
  return !has_high && !has_zero;
}

}  // namespace

std::size_t find_invalid_utf8(std::string_view text, std::size_t from) {
  std::size_t i = from;
  while (i < text.size()) {
    if (i + 8 <= text.size() && eight_ascii_bytes(text.data() + i)) {
      i += 8;
      continue;
    }
    const std::size_t length = utf8_sequence_length(text, i);
    if (length == 0) return i;
    i += length;
  }
  return std::string_view::npos;
}

std::string to_valid_utf8(std::string_view text) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::size_t bad = find_invalid_utf8(text);
  if (bad == std::string_view::npos) return std::string(text);
  std::string out;
  out.reserve(text.size() + 16);
  std::size_t done = 0;
  while (bad != std::string_view::npos) {
    out.append(text.substr(done, bad - done));
    out.append(kReplacement);  // one replacement per bad byte: never swallows good text
    done = bad + 1;
    bad = find_invalid_utf8(text, done);
  }
  out.append(text.substr(done));
  return out;
}

}  // namespace crl::results
