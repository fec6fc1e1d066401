// ResultsReader: opens a crl results file read-only to list its tables, read columns, /meta
// attributes and texts (tests, `crl report`). Safe to open while a ResultsWriter appends: it
// sees the file as of the writer's last flush before it opened (HDF5 caches what it has read,
// so open a new reader to see later rows). A read that overlaps a flush may fail: retry it.
// One thread per reader (it caches text-store indexes).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "results/hdf5_handle.h"
#include "results/results_validate.h"
#include "results/table_schema.h"

namespace crl::results {

class ResultsReader {
 public:
  // Throws InputError naming `path` when it is not a crl results file, or one whose layout is off
  // (results_validate.h); any HDF5 failure reading it later is an InputError naming it too.
  explicit ResultsReader(std::string path);

  // Checks what a command needs of the file (tables, typed columns, /meta JSON); InputError
  // naming the file and the first thing missing or of another type.
  void validate(const ResultsExpectations& expect) const;

  const std::string& path() const { return path_; }

  // Tables at the root, sorted by name.
  std::vector<std::string> tables() const;
  TableSchema schema(const std::string& table) const;
  // Rows every column holds (the shortest column's length, should a write have failed part-way).
  std::int64_t rows(const std::string& table) const;
  // One column's values, `rows(table)` of them; InputError naming table and column when absent.
  ColumnValues column(const std::string& table, const std::string& column) const;
  // The same as the type T the caller reads it as (int64_t, double, bool, std::string); InputError
  // naming the file and column when it holds another type.
  template <typename T>
  std::vector<T> column_as(const std::string& table, const std::string& column) const;

  std::vector<std::string> meta_keys() const;
  // Attribute `key` of /meta; InputError naming the key when it is absent.
  std::string meta(const std::string& key) const;
  // Attribute `key` of /meta parsed as JSON; InputError naming the key when it is not JSON.
  nlohmann::json meta_json(const std::string& key) const;

  std::vector<std::string> text_stores() const;
  // The text stored under `id` in /text/<store>, or nothing when there is none. The store's
  // ids are read once per reader, so looking up many texts costs one read each.
  std::optional<std::string> text(const std::string& store, std::int64_t id) const;
  // Every text of a store by id, in one read.
  std::map<std::int64_t, std::string> texts(const std::string& store) const;

 private:
  [[noreturn]] void throw_wrong_column_type(const std::string& table, const std::string& column, ColumnType found,
                                            ColumnType want) const;
  Hdf5Group open_table(const std::string& key, const char* kind, std::string* where) const;
  std::int64_t rows_of(hid_t group, const TableSchema& schema) const;

  struct TextIndex {
    std::string where;  // "text 'text/store' in 'file'", for messages
    hsize_t rows = 0;
    std::unordered_map<std::int64_t, hsize_t> row_of_id;
  };
  const TextIndex& text_index(const std::string& store) const;

  std::string path_;
  Hdf5File file_;
  mutable std::map<std::string, TextIndex> text_indexes_;  // by store, filled on first use
};

template <typename T>
std::vector<T> ResultsReader::column_as(const std::string& table, const std::string& name) const {
  ColumnValues values = column(table, name);
  if (auto* typed = std::get_if<std::vector<T>>(&values)) return std::move(*typed);
  const auto want = std::is_same_v<T, std::int64_t> ? ColumnType::int64
                    : std::is_same_v<T, double>     ? ColumnType::float64
                    : std::is_same_v<T, bool>       ? ColumnType::boolean
                                                    : ColumnType::string;
  throw_wrong_column_type(table, name, static_cast<ColumnType>(values.index()), want);
}

}  // namespace crl::results
