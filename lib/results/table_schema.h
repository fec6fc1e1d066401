// Schemas and row batches of crl's results tables: named columns of int64, float64, bool or
// UTF-8 string, each stored as one 1-D extendable HDF5 dataset (see docs/results-format.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace crl::results {

// The order matches the alternatives of ColumnValues and CellValue (index == type).
enum class ColumnType { int64 = 0, float64 = 1, boolean = 2, string = 3 };

// "int64", "float64", "bool", "string": the names used in messages and in the Python reader.
std::string_view column_type_name(ColumnType type);

struct ColumnSpec {
  std::string name;
  ColumnType type;
  bool operator==(const ColumnSpec&) const = default;
};
using TableSchema = std::vector<ColumnSpec>;

// "name:type, name:type" for messages.
std::string describe_schema(const TableSchema& schema);

// Throws InputError unless `name` is a usable table, store or column name: 1..64 characters
// of [A-Za-z0-9_], not starting with a digit (so it is also a Python identifier).
void check_result_name(std::string_view what, std::string_view name);

// Throws InputError unless the schema has at least one column and its names are valid and unique.
void check_schema(std::string_view table, const TableSchema& schema);

using ColumnValues = std::variant<std::vector<std::int64_t>, std::vector<double>, std::vector<bool>,
                                  std::vector<std::string>>;
using CellValue = std::variant<std::int64_t, double, bool, std::string>;

// Rows gathered for one append, kept column by column (the shape they are written in).
class RowBatch {
 public:
  explicit RowBatch(TableSchema schema);

  // Throws InputError naming the column when a value's type differs from the schema's,
  // or when the row has the wrong number of values; the batch is unchanged then.
  void add_row(const std::vector<CellValue>& cells);

  std::size_t rows() const { return rows_; }
  const TableSchema& schema() const { return schema_; }
  const ColumnValues& column(std::size_t index) const { return columns_.at(index); }

 private:
  TableSchema schema_;
  std::vector<ColumnValues> columns_;
  std::size_t rows_ = 0;
};

// `text` with every byte sequence that is not valid UTF-8, and every NUL, replaced by U+FFFD:
// results strings are stored as valid UTF-8 C strings, so h5py reads them back as str.
std::string to_valid_utf8(std::string_view text);
// Index of the first byte at or after `from` that starts no valid UTF-8 sequence (or is NUL);
// npos when the rest of `text` is valid.
std::size_t find_invalid_utf8(std::string_view text, std::size_t from = 0);

}  // namespace crl::results
