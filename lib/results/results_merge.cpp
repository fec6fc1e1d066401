// Joining crl results files into one: ids shifted per part, /meta of every part kept.
#include "results/results_merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <system_error>

#include "core/error.h"
#include "results/results_reader.h"
#include "results/results_writer.h"

namespace crl::results {
namespace {

constexpr const char* kMergedPartsKey = "merged_parts";

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_id_column(const ColumnSpec& c) {
  return c.type == ColumnType::int64 && (c.name == "row" || c.name == "id" || ends_with(c.name, "_id"));
}

bool is_id_list_column(const ColumnSpec& c) { return c.type == ColumnType::string && ends_with(c.name, "_ids"); }

// Negative values mean "no id" (a -1 parent, say) and stay as they are.
std::int64_t shifted(std::int64_t id, std::int64_t offset, const std::string& where) {
  if (id < 0) return id;
  std::int64_t out = 0;
  if (__builtin_add_overflow(id, offset, &out)) {
    throw InputError(fmt::format("{}: id {} shifted by {} is past int64; merge fewer parts", where, id, offset));
  }
  return out;
}

// "3,17,20" -> each id; "" -> none. InputError naming `where` for anything else.
std::vector<std::int64_t> parse_id_list(const std::string& text, const std::string& where) {
  std::vector<std::int64_t> ids;
  if (text.empty()) return ids;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    std::int64_t id = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + begin, text.data() + end, id);
    if (ec != std::errc() || ptr != text.data() + end || end == begin) {
      throw InputError(fmt::format("{}: '{}' is not a comma-separated list of ids", where, text));
    }
    ids.push_back(id);
    begin = end + 1;
  }
  return ids;
}

std::string shifted_id_list(const std::string& text, std::int64_t offset, const std::string& where) {
  std::string out;
  for (const std::int64_t id : parse_id_list(text, where)) {
    if (!out.empty()) out += ',';
    out += std::to_string(shifted(id, offset, where));
  }
  return out;
}

CellValue cell_at(const ColumnValues& values, std::size_t row) {
  return std::visit([row](const auto& v) -> CellValue { return CellValue{v[row]}; }, values);
}

// The part's ids shifted by `offset`; `largest` becomes the largest id seen before shifting.
ColumnValues shift_ids(const ColumnSpec& spec, ColumnValues values, std::int64_t offset, const std::string& where,
                       std::optional<std::int64_t>& largest) {
  if (is_id_column(spec)) {
    for (auto& id : std::get<std::vector<std::int64_t>>(values)) {
      largest = std::max(largest.value_or(id), id);
      id = shifted(id, offset, where);
    }
  } else if (is_id_list_column(spec)) {
    for (auto& list : std::get<std::vector<std::string>>(values)) {
      for (const std::int64_t id : parse_id_list(list, where)) largest = std::max(largest.value_or(id), id);
      list = shifted_id_list(list, offset, where);
    }
  }
  return values;
}

struct PartPlan {
  std::string path;
  ResultsReader reader;
  std::vector<std::string> tables;
  std::vector<std::string> text_stores;
};

// Every part opened and its tables' schemas checked against the first part that has each table.
std::vector<PartPlan> check_parts(const std::string& out_path, const std::vector<std::string>& part_paths,
                                  std::map<std::string, TableSchema>& schemas) {
  if (part_paths.empty()) throw InputError("results merge: give at least one part file");
  std::error_code ec;
  if (std::filesystem::exists(out_path, ec)) {
    throw InputError(fmt::format("{}: already exists; results merge writes a new file (remove it or pick another)", out_path));
  }
  std::set<std::filesystem::path> seen;
  std::map<std::string, std::string> schema_origin;  // table -> the first part that has it
  std::vector<PartPlan> plans;
  for (const std::string& path : part_paths) {
    const auto canonical = std::filesystem::weakly_canonical(path, ec);
    if (!seen.insert(ec ? std::filesystem::path(path) : canonical).second) {
      throw InputError(fmt::format("{}: given twice; each part is merged once", path));
    }
    PartPlan plan{path, ResultsReader(path), {}, {}};
    plan.tables = plan.reader.tables();
    plan.text_stores = plan.reader.text_stores();
    for (const auto& table : plan.tables) {
      const TableSchema schema = plan.reader.schema(table);
      const auto [it, inserted] = schemas.emplace(table, schema);
      if (inserted) schema_origin[table] = path;
      if (!inserted && it->second != schema) {
        throw InputError(fmt::format("{}: table '{}' has columns ({}), but {} has ({}); only files of one kind merge",
                                     path, table, describe_schema(schema), schema_origin[table],
                                     describe_schema(it->second)));
      }
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

// Appends one part to `writer`; returns the largest id it held (nothing when it had none).
std::optional<std::int64_t> append_part(ResultsWriter& writer, const PartPlan& plan,
                                        const std::map<std::string, TableSchema>& schemas, MergedPart& merged) {
  std::optional<std::int64_t> largest;
  for (const auto& table : plan.tables) {
    const TableSchema& schema = schemas.at(table);
    writer.declare_table(table, schema);
    const auto rows = static_cast<std::size_t>(plan.reader.rows(table));
    std::vector<ColumnValues> columns;
    for (const auto& spec : schema) {
      const std::string where = fmt::format("{}: table '{}' column '{}'", plan.path, table, spec.name);
      columns.push_back(shift_ids(spec, plan.reader.column(table, spec.name), merged.id_offset, where, largest));
    }
    RowBatch batch(schema);
    std::vector<CellValue> cells(schema.size());
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < schema.size(); ++c) cells[c] = cell_at(columns[c], r);
      batch.add_row(cells);
    }
    if (rows > 0) writer.append(table, batch);
    merged.rows[table] = static_cast<std::int64_t>(rows);
  }
  for (const auto& store : plan.text_stores) {
    const std::string where = fmt::format("{}: text store '{}'", plan.path, store);
    std::vector<std::int64_t> ids;
    std::vector<std::string> texts;
    for (auto& [id, text] : plan.reader.texts(store)) {
      largest = std::max(largest.value_or(id), id);
      ids.push_back(shifted(id, merged.id_offset, where));
      texts.push_back(std::move(text));
    }
    if (!ids.empty()) writer.put_texts(store, ids, texts);
    merged.texts[store] = static_cast<std::int64_t>(ids.size());
  }
  return largest;
}

// /meta: every part's whole /meta under merged_parts, and the keys all parts agree on as they were.
void write_meta(ResultsWriter& writer, const std::vector<PartPlan>& plans, const std::vector<MergedPart>& merged) {
  nlohmann::json parts = nlohmann::json::array();
  std::map<std::string, std::optional<std::string>> agreed;  // nothing: parts differ
  for (std::size_t i = 0; i < plans.size(); ++i) {
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& key : plans[i].reader.meta_keys()) {
      const std::string value = plans[i].reader.meta(key);
      meta[key] = value;
      if (key == kMergedPartsKey) continue;
      const auto [it, inserted] = agreed.emplace(key, value);
      if (!inserted && it->second != value) it->second.reset();
    }
    parts.push_back({{"file", merged[i].path},
                     {"id_offset", merged[i].id_offset},
                     {"rows", merged[i].rows},
                     {"texts", merged[i].texts},
                     {"meta", std::move(meta)}});
  }
  for (const auto& [key, value] : agreed) {
    if (value) writer.set_meta(key, *value);
  }
  writer.set_meta_json(kMergedPartsKey, parts);
}

}  // namespace

nlohmann::json to_json(const MergeSummary& summary) {
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& p : summary.parts) {
    parts.push_back({{"file", p.path}, {"id_offset", p.id_offset}, {"rows", p.rows}, {"texts", p.texts}});
  }
  return {{"out", summary.path}, {"parts", parts}, {"rows", summary.rows}, {"texts", summary.texts}};
}

MergeSummary merge_results_files(const std::string& out_path, const std::vector<std::string>& part_paths,
                                 const MergeProgress& progress) {
  std::map<std::string, TableSchema> schemas;
  const std::vector<PartPlan> plans = check_parts(out_path, part_paths, schemas);
  MergeSummary summary;
  summary.path = out_path;
  std::optional<ResultsWriter> writer;
  writer.emplace(out_path);
  try {
    std::int64_t next_offset = 0;
    for (std::size_t i = 0; i < plans.size(); ++i) {
      MergedPart merged;
      merged.path = plans[i].path;
      merged.id_offset = next_offset;
      const auto largest = append_part(*writer, plans[i], schemas, merged);
      // The next part's ids start after this part's largest (shifted) id, or where this one's began.
      if (largest && *largest >= 0) next_offset = shifted(*largest, merged.id_offset + 1, plans[i].path);
      writer->flush();
      for (const auto& [t, n] : merged.rows) summary.rows[t] += n;
      for (const auto& [s, n] : merged.texts) summary.texts[s] += n;
      summary.parts.push_back(std::move(merged));
      if (progress) progress(i + 1, plans.size(), summary.parts.back());
    }
    write_meta(*writer, plans, summary.parts);
    writer->close();
  } catch (...) {
    // The file is ours (it did not exist): a half-merged file must not pass for a whole one.
    writer.reset();
    std::error_code ec;
    std::filesystem::remove(out_path, ec);
    throw;
  }
  return summary;
}

}  // namespace crl::results
