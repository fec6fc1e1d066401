// ResultsReader: read-only access to a crl results file, validating its layout as it goes.
#include "results/results_reader.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/json_bounded.h"
#include "results/hdf5_check.h"
#include "results/hdf5_storage.h"
#include "results/results_validate.h"

namespace crl::results {

using namespace detail;

ResultsReader::ResultsReader(std::string path) : path_(std::move(path)) {
  with_input_file_named(path_, [&] {
    hdf5_silence_default_printing();
    const auto fapl = file_access_without_hdf5_locking();
    file_ = open_existing_results_file(path_, H5F_ACC_RDONLY, fapl.id());
  });
  // Before anything reads it: a file whose layout is off is refused here, naming what is off.
  validate_layout(file_.id(), path_);
}

namespace {

// Child groups of `parent` whose crl_kind attribute is `kind`.
std::vector<std::string> groups_of_kind(hid_t parent, const char* kind, const std::string& where) {
  std::vector<std::string> names;
  for (const auto& name : child_names(parent)) {
    H5O_info_t info{};
    CRL_H5_CHECK(H5Oget_info_by_name(parent, name.c_str(), &info, H5P_DEFAULT));
    if (info.type != H5O_TYPE_GROUP) continue;
    Hdf5Group group(CRL_H5_CHECK(H5Gopen2(parent, name.c_str(), H5P_DEFAULT)));
    if (has_attribute(group.id(), kKindAttribute) &&
        read_string_attribute(group.id(), kKindAttribute, where) == kind) {
      names.push_back(name);
    }
  }
  return names;
}

}  // namespace

std::vector<std::string> ResultsReader::tables() const {
  return with_input_file_named(path_, [&]() -> std::vector<std::string> {
    return groups_of_kind(file_.id(), "table", path_);
  });
}

std::vector<std::string> ResultsReader::text_stores() const {
  return with_input_file_named(path_, [&]() -> std::vector<std::string> {
    if (!has_child(file_.id(), kTextGroup)) return {};
    Hdf5Group text(CRL_H5_CHECK(H5Gopen2(file_.id(), kTextGroup, H5P_DEFAULT)));
    return groups_of_kind(text.id(), "text", path_);
  });
}

Hdf5Group ResultsReader::open_table(const std::string& key, const char* kind,
                                    std::string* where) const {
  *where = fmt::format("{} '{}' in '{}'", kind, key, path_);
  // Names as the writer validates them, so that "../meta" or "a/b" never reach HDF5 as paths.
  const std::string text_prefix = std::string(kTextGroup) + "/";
  const bool is_text = std::string_view(kind) == "text" && key.starts_with(text_prefix);
  check_result_name(kind, is_text ? std::string_view(key).substr(text_prefix.size()) : std::string_view(key));
  if (CRL_H5_CHECK(H5Lexists(file_.id(), key.substr(0, key.find('/')).c_str(), H5P_DEFAULT)) <= 0 ||
      CRL_H5_CHECK(H5Lexists(file_.id(), key.c_str(), H5P_DEFAULT)) <= 0) {
    throw InputError(fmt::format("there is no {}", *where));
  }
  Hdf5Group group(CRL_H5_CHECK(H5Gopen2(file_.id(), key.c_str(), H5P_DEFAULT)));
  if (!has_attribute(group.id(), kKindAttribute) ||
      read_string_attribute(group.id(), kKindAttribute, *where) != kind) {
    throw InputError(fmt::format("'{}' in '{}' is not a crl {}", key, path_, kind));
  }
  return group;
}

std::int64_t ResultsReader::rows_of(hid_t group, const TableSchema& schema) const {
  hsize_t rows = 0;
  for (std::size_t i = 0; i < schema.size(); ++i) {
    Hdf5Dataset dataset(CRL_H5_CHECK(H5Dopen2(group, schema[i].name.c_str(), H5P_DEFAULT)));
    const auto length = column_length(dataset.id());
    rows = i == 0 ? length : std::min(rows, length);
  }
  return static_cast<std::int64_t>(rows);
}

TableSchema ResultsReader::schema(const std::string& table) const {
  return with_input_file_named(path_, [&]() -> TableSchema {
    std::string where;
    const auto group = open_table(table, "table", &where);
    return read_schema(group.id(), where);
  });
}

std::int64_t ResultsReader::rows(const std::string& table) const {
  return with_input_file_named(path_, [&]() -> std::int64_t {
    std::string where;
    const auto group = open_table(table, "table", &where);
    return rows_of(group.id(), read_schema(group.id(), where));
  });
}

ColumnValues ResultsReader::column(const std::string& table, const std::string& column) const {
  return with_input_file_named(path_, [&]() -> ColumnValues {
    std::string where;
    const auto group = open_table(table, "table", &where);
    const auto schema = read_schema(group.id(), where);
    check_result_name("column", column);
    const auto it = std::find_if(schema.begin(), schema.end(),
                                 [&](const ColumnSpec& c) { return c.name == column; });
    if (it == schema.end()) {
      throw InputError(
          fmt::format("{} has no column '{}' (it has {})", where, column, describe_schema(schema)));
    }
    Hdf5Dataset dataset(CRL_H5_CHECK(H5Dopen2(group.id(), column.c_str(), H5P_DEFAULT)));
    return read_column_values(dataset.id(), it->type,
                              static_cast<hsize_t>(rows_of(group.id(), schema)),
                              fmt::format("column '{}' of {}", column, where));
  });
}

std::vector<std::string> ResultsReader::meta_keys() const {
  return with_input_file_named(path_, [&]() -> std::vector<std::string> {
    if (!has_child(file_.id(), kMetaGroup)) return {};
    Hdf5Group meta(CRL_H5_CHECK(H5Gopen2(file_.id(), kMetaGroup, H5P_DEFAULT)));
    return attribute_names(meta.id());
  });
}

std::string ResultsReader::meta(const std::string& key) const {
  return with_input_file_named(path_, [&]() -> std::string {
    const std::string where = fmt::format("/meta of '{}'", path_);
    if (!has_child(file_.id(), kMetaGroup)) throw InputError(fmt::format("there is no {}", where));
    Hdf5Group meta(CRL_H5_CHECK(H5Gopen2(file_.id(), kMetaGroup, H5P_DEFAULT)));
    return read_string_attribute(meta.id(), key, where);
  });
}

nlohmann::json ResultsReader::meta_json(const std::string& key) const {
  return parse_json_bounded(meta(key), fmt::format("/meta attribute '{}' of '{}'", key, path_));
}

void ResultsReader::validate(const ResultsExpectations& expect) const {
  const auto present = tables();
  for (const auto& t : expect.tables) {
    if (std::find(present.begin(), present.end(), t.table) == present.end()) {
      if (t.required) throw InputError(fmt::format("'{}' has no table '{}'", path_, t.table));
      continue;
    }
    const TableSchema found = schema(t.table);
    const auto check = [&](const ColumnSpec& want, bool required) {
      const auto it = std::find_if(found.begin(), found.end(), [&](const ColumnSpec& c) { return c.name == want.name; });
      if (it == found.end()) {
        if (required) {
          throw InputError(fmt::format("table '{}' of '{}' has no column '{}' ({})", t.table, path_, want.name,
                                       column_type_name(want.type)));
        }
        return;
      }
      if (it->type != want.type) {
        throw InputError(fmt::format("column '{}/{}' of '{}' holds {}, not {}", t.table, want.name, path_,
                                     column_type_name(it->type), column_type_name(want.type)));
      }
    };
    for (const auto& c : t.columns) check(c, true);
    for (const auto& c : t.optional) check(c, false);
  }
  const auto keys = meta_keys();
  for (const auto& m : expect.meta) {
    if (std::find(keys.begin(), keys.end(), m.key) == keys.end()) {
      if (m.required) throw InputError(fmt::format("/meta of '{}' has no attribute '{}'", path_, m.key));
      continue;
    }
    if (m.shape == MetaShape::text) continue;
    const nlohmann::json value = meta_json(m.key);
    const auto bad = [&](const char* what) {
      return InputError(fmt::format("/meta attribute '{}' of '{}' is not {}: {:.200}", m.key, path_, what, value.dump()));
    };
    if (m.shape == MetaShape::json_object && !value.is_object()) throw bad("a JSON object");
    if (m.shape == MetaShape::json_string_list) {
      if (!value.is_array()) throw bad("a JSON list of strings");
      for (const auto& item : value) {
        if (!item.is_string()) throw bad("a JSON list of strings");
      }
    }
  }
}

const ResultsReader::TextIndex& ResultsReader::text_index(const std::string& store) const {
  if (const auto it = text_indexes_.find(store); it != text_indexes_.end()) return it->second;
  TextIndex index;
  const auto group = open_table(fmt::format("{}/{}", kTextGroup, store), "text", &index.where);
  const auto schema = read_schema(group.id(), index.where);
  if (schema != TableSchema{{"id", ColumnType::int64}, {"text", ColumnType::string}}) {
    throw InputError(fmt::format("{} has columns ({}), not (id:int64, text:string)", index.where,
                                 describe_schema(schema)));
  }
  index.rows = static_cast<hsize_t>(rows_of(group.id(), schema));
  Hdf5Dataset ids_dataset(CRL_H5_CHECK(H5Dopen2(group.id(), "id", H5P_DEFAULT)));
  const auto ids = std::get<std::vector<std::int64_t>>(
      read_column_values(ids_dataset.id(), ColumnType::int64, index.rows, index.where));
  for (std::size_t row = 0; row < ids.size(); ++row) index.row_of_id.emplace(ids[row], row);
  return text_indexes_.emplace(store, std::move(index)).first->second;
}

std::optional<std::string> ResultsReader::text(const std::string& store, std::int64_t id) const {
  return with_input_file_named(path_, [&]() -> std::optional<std::string> {
    const auto& index = text_index(store);
    const auto found = index.row_of_id.find(id);
    if (found == index.row_of_id.end()) return std::nullopt;
    // Read just that one string.
    Hdf5Dataset texts(CRL_H5_CHECK(
        H5Dopen2(file_.id(), fmt::format("{}/{}/text", kTextGroup, store).c_str(), H5P_DEFAULT)));
    Hdf5Dataspace file_space(CRL_H5_CHECK(H5Dget_space(texts.id())));
    const hsize_t start = found->second, one = 1;
    CRL_H5_CHECK(
        H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, &start, nullptr, &one, nullptr));
    Hdf5Dataspace memory_space(CRL_H5_CHECK(H5Screate_simple(1, &one, nullptr)));
    const auto memtype = string_type();
    char* data = nullptr;
    try {
      CRL_H5_CHECK(H5Dread(texts.id(), memtype.id(), memory_space.id(), file_space.id(),
                           H5P_DEFAULT, &data));
    } catch (const ApiError& e) {
      throw InputError(fmt::format("cannot read text {} of {} (is the file damaged?): {}", id,
                                   index.where, e.what()));
    }
    std::string value = data ? data : "";
    CRL_H5_CHECK(H5Dvlen_reclaim(memtype.id(), memory_space.id(), H5P_DEFAULT, &data));
    return value;
  });
}

std::map<std::int64_t, std::string> ResultsReader::texts(const std::string& store) const {
  return with_input_file_named(path_, [&]() -> std::map<std::int64_t, std::string> {
    const auto& index = text_index(store);
    Hdf5Dataset texts(CRL_H5_CHECK(
        H5Dopen2(file_.id(), fmt::format("{}/{}/text", kTextGroup, store).c_str(), H5P_DEFAULT)));
    auto values = std::get<std::vector<std::string>>(
        read_column_values(texts.id(), ColumnType::string, index.rows, index.where));
    std::map<std::int64_t, std::string> out;
    for (const auto& [id, row] : index.row_of_id) out.emplace(id, std::move(values[row]));
    return out;
  });
}

void ResultsReader::throw_wrong_column_type(const std::string& table, const std::string& column, ColumnType found,
                                            ColumnType want) const {
  throw InputError(fmt::format("column '{}/{}' of '{}' holds {}, not {}", table, column, path_,
                               column_type_name(found), column_type_name(want)));
}

}  // namespace crl::results
