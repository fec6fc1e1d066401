// Private to lib/results: the HDF5 calls shared by the writer and the reader (types, string
// attributes, column datasets, opening files with errors that name the path).
#pragma once

#include <fmt/format.h>
#include <hdf5.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "results/hdf5_handle.h"
#include "results/table_schema.h"

namespace crl::results::detail {

// Layout names (documented in docs/results-format.md).
inline constexpr const char* kFormatAttribute = "crl_format";
inline constexpr const char* kFormatName = "crl-results";
inline constexpr const char* kFormatVersionAttribute = "crl_format_version";
inline constexpr std::int64_t kFormatVersion = 1;
inline constexpr const char* kKindAttribute = "crl_kind";        // "table" or "text"
inline constexpr const char* kColumnsAttribute = "crl_columns";  // column names in order
inline constexpr const char* kMetaGroup = "meta";
inline constexpr const char* kTextGroup = "text";

// Variable-length UTF-8 C string (what h5py reads as str).
Hdf5Datatype string_type();
// int8 enum {FALSE = 0, TRUE = 1}: stored as int8, read by h5py as numpy bool.
Hdf5Datatype bool_type();
// The in-memory type used to write and read a column of `type`.
Hdf5Datatype memory_type(ColumnType type);

// The column type of a dataset's stored type; throws InputError naming `where` if crl cannot read
// it.
ColumnType column_type_of(hid_t dataset, const std::string& where);

void write_string_attribute(hid_t object, const std::string& name, const std::string& value);
void write_string_list_attribute(hid_t object, const std::string& name,
                                 const std::vector<std::string>& values);
void write_int64_attribute(hid_t object, const std::string& name, std::int64_t value);
bool has_attribute(hid_t object, const std::string& name);
// Throws InputError naming `where` when the attribute is missing or not of the expected type.
std::string read_string_attribute(hid_t object, const std::string& name, const std::string& where);
std::vector<std::string> read_string_list_attribute(hid_t object, const std::string& name,
                                                    const std::string& where);
std::int64_t read_int64_attribute(hid_t object, const std::string& name, const std::string& where);
std::vector<std::string> attribute_names(hid_t object);

// Names of the links directly inside a group, sorted.
std::vector<std::string> child_names(hid_t group);
bool has_child(hid_t group, const std::string& name);

// A table's schema from its group: column order from crl_columns, types from the datasets.
// `where` is "table 't' in 'file'" for messages.
TableSchema read_schema(hid_t table_group, const std::string& where);
// Current length of a 1-D column dataset (InputError naming it when it is not 1-D or claims more
// rows than its file can hold).
hsize_t column_length(hid_t dataset);
// "'/table/column' of 'file.h5'": an object's path and file, for messages.
std::string object_name(hid_t id);
// The first `rows` values of a column.
ColumnValues read_column_values(hid_t dataset, ColumnType type, hsize_t rows,
                                const std::string& where);

// Throws InputError ("not an HDF5 file", "truncated or damaged", "not a crl results file")
// naming `path`, or IoError when it cannot be read at all; returns the checked open handle.
Hdf5File open_existing_results_file(const std::string& path, unsigned flags, hid_t fapl);

// A file-access property list with HDF5's own file locking off (crl's writer holds a lock file,
// so readers such as h5py can open a file while a job writes it).
Hdf5PropertyList file_access_without_hdf5_locking();

// Runs `action`; an HDF5 ApiError escaping it is rethrown with the results file's path in front
// (HDF5's own stack names the call, not the file).
template <typename Action>
auto with_file_named(const std::string& path, Action&& action) -> decltype(action()) {
  try {
    return action();
  } catch (const ApiError& e) {
    if (std::string_view(e.what()).find(path) != std::string_view::npos) throw;
    throw ApiError(e.api(), fmt::format("results file '{}': {}", path, e.what()));
  }
}

// with_file_named for readers: everything a reader does is reading a file someone gave it, so an
// HDF5 failure there (a damaged heap, a truncated chunk) is that file's fault: an InputError
// naming it, not crl's exit 4.
template <typename Action>
auto with_input_file_named(const std::string& path, Action&& action) -> decltype(action()) {
  try {
    return action();
  } catch (const ApiError& e) {
    throw InputError(fmt::format("results file '{}' cannot be read (damaged?): {}", path, e.what()));
  }
}

}  // namespace crl::results::detail
