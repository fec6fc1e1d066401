// Validation of a crl results file before anything reads it: the format's layout (groups, kinds,
// column lists, dtypes, equal lengths, attribute types, unique text ids), and what one command
// needs of it (tables, columns of given types, /meta keys holding JSON of a given shape).
// ResultsReader checks the layout when it opens a file and ResultsWriter before it appends to
// one; commands check their needs with ResultsReader::validate. Every problem is an InputError
// naming the file and the object.
#pragma once

#include <hdf5.h>

#include <string>
#include <vector>

#include "results/table_schema.h"

namespace crl::results {

struct TableExpectation {
  std::string table;
  TableSchema columns;         // present, of these types
  TableSchema optional = {};   // of these types when present (a column older files lack)
  bool required = false;       // the table itself must be there
};

enum class MetaShape { text, json, json_object, json_string_list };

struct MetaExpectation {
  std::string key;
  MetaShape shape = MetaShape::text;
  bool required = false;
};

struct ResultsExpectations {
  std::vector<TableExpectation> tables;
  std::vector<MetaExpectation> meta;
};

namespace detail {
// The layout check on an open file (docs/results-format.md, "Layout"). HDF5 failures while
// reading it (a damaged heap, say) are InputErrors naming `path` too.
void validate_layout(hid_t file, const std::string& path);
}  // namespace detail

}  // namespace crl::results
