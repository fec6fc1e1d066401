// The layout check of crl results files (see results_validate.h; the layout: docs/results-format.md).
#include "results/results_validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_set>

#include "core/error.h"
#include "results/hdf5_check.h"
#include "results/hdf5_storage.h"

namespace crl::results::detail {
namespace {

const TableSchema kTextSchema = {{"id", ColumnType::int64}, {"text", ColumnType::string}};

H5O_type_t object_type(hid_t parent, const std::string& name) {
  H5O_info_t info{};
  CRL_H5_CHECK(H5Oget_info_by_name(parent, name.c_str(), &info, H5P_DEFAULT));
  return info.type;
}

// /meta: attributes only, each a single UTF-8 string under a valid name; reading each value also
// reads its heap, so a damaged one shows here.
void check_meta(hid_t file, const std::string& path) {
  const std::string where = fmt::format("/meta of '{}'", path);
  if (object_type(file, kMetaGroup) != H5O_TYPE_GROUP) throw InputError(fmt::format("{} is not a group", where));
  Hdf5Group meta(CRL_H5_CHECK(H5Gopen2(file, kMetaGroup, H5P_DEFAULT)));
  if (!child_names(meta.id()).empty()) throw InputError(fmt::format("{} holds objects; it holds attributes only", where));
  for (const auto& key : attribute_names(meta.id())) {
    try {
      check_result_name("meta key", key);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", where, e.what()));
    }
    read_string_attribute(meta.id(), key, where);
  }
}

// A table or text store: a group of kind `kind` whose crl_columns list its datasets, each a 1-D
// column of a crl type, all of one length. Text stores also: (id, text), ids unique.
void check_table(hid_t parent, const std::string& name, const std::string& key, const char* kind, const std::string& path) {
  const std::string where = fmt::format("{} '{}' in '{}'", kind, key, path);
  if (object_type(parent, name) != H5O_TYPE_GROUP) {
    throw InputError(fmt::format("'/{}' in '{}' is not a group (a crl {})", key, path, kind));
  }
  Hdf5Group group(CRL_H5_CHECK(H5Gopen2(parent, name.c_str(), H5P_DEFAULT)));
  if (!has_attribute(group.id(), kKindAttribute)) {
    throw InputError(fmt::format("'/{}' in '{}' has no {} attribute: not a crl {}", key, path, kKindAttribute, kind));
  }
  const std::string found_kind = read_string_attribute(group.id(), kKindAttribute, where);
  if (found_kind != kind) {
    throw InputError(fmt::format("'/{}' in '{}' is a crl '{}', where a {} belongs", key, path, found_kind, kind));
  }
  const TableSchema schema = read_schema(group.id(), where);
  try {
    check_schema(key, schema);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", where, e.what()));
  }
  if (std::string_view(kind) == "text" && schema != kTextSchema) {
    throw InputError(fmt::format("{} has columns ({}), not (id:int64, text:string)", where, describe_schema(schema)));
  }
  std::set<std::string> listed;
  for (const auto& c : schema) listed.insert(c.name);
  for (const auto& child : child_names(group.id())) {
    if (!listed.contains(child)) {
      throw InputError(fmt::format("{} holds '{}', which its {} do not list", where, child, kColumnsAttribute));
    }
  }
  hsize_t rows = 0;
  for (std::size_t i = 0; i < schema.size(); ++i) {
    Hdf5Dataset dataset(CRL_H5_CHECK(H5Dopen2(group.id(), schema[i].name.c_str(), H5P_DEFAULT)));
    const hsize_t length = column_length(dataset.id());
    if (i == 0) {
      rows = length;
    } else if (length != rows) {
      // crl's writer commits whole flushes, so this is damage (or a writer before crl 41, killed in a flush).
      throw InputError(fmt::format("{} is damaged: column '{}' has {} rows but '{}' has {}", where, schema[0].name, rows,
                                   schema[i].name, length));
    }
  }
  if (std::string_view(kind) == "text") {
    Hdf5Dataset ids_dataset(CRL_H5_CHECK(H5Dopen2(group.id(), "id", H5P_DEFAULT)));
    const auto ids = std::get<std::vector<std::int64_t>>(read_column_values(ids_dataset.id(), ColumnType::int64, rows, where));
    std::unordered_set<std::int64_t> seen;
    for (const std::int64_t id : ids) {
      if (!seen.insert(id).second) throw InputError(fmt::format("{} holds id {} twice", where, id));
    }
  }
}

}  // namespace

void validate_layout(hid_t file, const std::string& path) {
  with_input_file_named(path, [&] {
    for (const auto& name : child_names(file)) {
      if (name == kMetaGroup) {
        check_meta(file, path);
      } else if (name == kTextGroup) {
        if (object_type(file, kTextGroup) != H5O_TYPE_GROUP) {
          throw InputError(fmt::format("'/{}' in '{}' is not a group", kTextGroup, path));
        }
        Hdf5Group text(CRL_H5_CHECK(H5Gopen2(file, kTextGroup, H5P_DEFAULT)));
        for (const auto& store : child_names(text.id())) {
          try {
            check_result_name("text store", store);
          } catch (const InputError& e) {
            throw InputError(fmt::format("'{}': {}", path, e.what()));
          }
          check_table(text.id(), store, fmt::format("{}/{}", kTextGroup, store), "text", path);
        }
      } else {
        try {
          check_result_name("table", name);
        } catch (const InputError& e) {
          throw InputError(fmt::format("'{}': {}", path, e.what()));
        }
        check_table(file, name, name, "table", path);
      }
    }
  });
}

}  // namespace crl::results::detail
