// Verdict rows in and out of a crl results file.
#include "eval/verdict_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace crl::eval {

using results::CellValue;
using results::ColumnType;

const results::TableSchema& verdict_table_schema() {
  static const results::TableSchema schema = {
      {"row", ColumnType::int64},
      {"task", ColumnType::string},
      {"candidate", ColumnType::string},
      {"backend", ColumnType::string},
      {"scale", ColumnType::string},
      {"status", ColumnType::string},
      {"message", ColumnType::string},
      {"trials_run", ColumnType::int64},
      {"trials_passed", ColumnType::int64},
      {"reference_median_us", ColumnType::float64},
      {"reference_iqr_us", ColumnType::float64},
      {"reference_samples", ColumnType::int64},
      {"candidate_median_us", ColumnType::float64},
      {"candidate_iqr_us", ColumnType::float64},
      {"candidate_samples", ColumnType::int64},
      {"speedup", ColumnType::float64},
      {"speedup_ci_low", ColumnType::float64},
      {"speedup_ci_high", ColumnType::float64},
      {"reward", ColumnType::float64},
      {"seconds", ColumnType::float64},
      {"baseline", ColumnType::string},
      {"speedup_ci_half_width", ColumnType::float64},
      {"format", ColumnType::string},
      {"params", ColumnType::string},
  };
  return schema;
}

namespace {

// The columns added to the table after its first files were written: appending to such a file
// adds them, its earlier rows reading "" (read back as eager and crl) or NaN.
const results::TableSchema& columns_older_files_lack() {
  static const results::TableSchema columns = {
      {"baseline", ColumnType::string},
      {"speedup_ci_half_width", ColumnType::float64},
      {"format", ColumnType::string},
      {"params", ColumnType::string},
  };
  return columns;
}

constexpr const char* kCompileLogStore = "verdict_compile_log";
constexpr const char* kWorkerLogStore = "verdict_worker_log";
constexpr const char* kStepsStore = "verdict_steps";
constexpr const char* kProgramStore = "verdict_program";

nlohmann::json steps_json(const Verdict& v) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : v.steps) {
    steps.push_back({{"name", s.name}, {"passed", s.passed}, {"detail", s.detail}, {"seconds", s.seconds}});
  }
  return steps;
}

template <typename T>
const std::vector<T>& column_as(const results::ColumnValues& values, const std::string& name) {
  if (const auto* v = std::get_if<std::vector<T>>(&values)) return *v;
  throw InputError(fmt::format("table '{}': column '{}' has the wrong type", kVerdictTable, name));
}

}  // namespace

int64_t append_verdicts(results::ResultsWriter& writer, const std::vector<Verdict>& verdicts,
                        const std::vector<std::string>& programs) {
  if (!programs.empty() && programs.size() != verdicts.size()) {
    throw Error(fmt::format("append_verdicts: {} programs for {} verdicts", programs.size(), verdicts.size()));
  }
  const int64_t first = writer.declare_table(kVerdictTable, verdict_table_schema(), columns_older_files_lack());
  results::RowBatch batch(verdict_table_schema());
  std::vector<int64_t> ids;
  std::vector<std::string> compile_logs;
  std::vector<std::string> worker_logs;
  std::vector<std::string> steps;
  int64_t row = first;
  for (const Verdict& v : verdicts) {
    batch.add_row({CellValue{row}, v.task_id, v.candidate, v.backend, v.scale, v.status_text(), v.message,
                   CellValue{int64_t{v.trials_run}}, CellValue{int64_t{v.trials_passed}}, v.reference_time.median_us,
                   v.reference_time.iqr_us, CellValue{int64_t{v.reference_time.samples}}, v.candidate_time.median_us,
                   v.candidate_time.iqr_us, CellValue{int64_t{v.candidate_time.samples}}, v.speedup, v.speedup_ci_low,
                   v.speedup_ci_high, v.reward, v.seconds, v.baseline,
                   std::isfinite(v.speedup_ci_half_width()) ? v.speedup_ci_half_width() : 0.0, v.format,
                   v.params});
    ids.push_back(row++);
    compile_logs.push_back(results::to_valid_utf8(v.compile_log));
    worker_logs.push_back(results::to_valid_utf8(v.worker_log));
    steps.push_back(results::to_valid_utf8(steps_json(v).dump()));
  }
  writer.append(kVerdictTable, batch);
  writer.put_texts(kCompileLogStore, ids, compile_logs);
  writer.put_texts(kWorkerLogStore, ids, worker_logs);
  writer.put_texts(kStepsStore, ids, steps);
  if (!programs.empty()) {
    std::vector<std::string> texts;
    for (const auto& p : programs) texts.push_back(results::to_valid_utf8(p));
    writer.put_texts(kProgramStore, ids, texts);
  }
  return first;
}

std::vector<Verdict> read_verdicts(const results::ResultsReader& reader) {
  const int64_t rows = reader.rows(kVerdictTable);
  auto col = [&](const char* name) { return reader.column(kVerdictTable, name); };
  const auto row_c = col("row"), task = col("task"), cand = col("candidate"), backend = col("backend"),
             scale = col("scale"), status = col("status"), message = col("message"), trials_run = col("trials_run"),
             trials_passed = col("trials_passed"), rm = col("reference_median_us"), ri = col("reference_iqr_us"),
             rs = col("reference_samples"), cm = col("candidate_median_us"), ci = col("candidate_iqr_us"),
             cs = col("candidate_samples"), sp = col("speedup"), lo = col("speedup_ci_low"), hi = col("speedup_ci_high"),
             reward = col("reward"), seconds = col("seconds");
  const auto schema = reader.schema(kVerdictTable);
  const auto has = [&](const char* name) {
    return std::any_of(schema.begin(), schema.end(), [&](const auto& c) { return c.name == name; });
  };
  const bool has_baseline = has("baseline"), has_format = has("format"), has_params = has("params");
  const auto baseline = has_baseline ? col("baseline") : results::ColumnValues{};
  const auto format = has_format ? col("format") : results::ColumnValues{};
  const auto params = has_params ? col("params") : results::ColumnValues{};
  std::vector<Verdict> out;
  for (int64_t r = 0; r < rows; ++r) {
    const auto i = static_cast<size_t>(r);
    Verdict v;
    const int64_t id = column_as<int64_t>(row_c, "row")[i];
    v.task_id = column_as<std::string>(task, "task")[i];
    v.candidate = column_as<std::string>(cand, "candidate")[i];
    v.backend = column_as<std::string>(backend, "backend")[i];
    v.scale = column_as<std::string>(scale, "scale")[i];
    v.status = parse_verdict_status(column_as<std::string>(status, "status")[i], &v.hack_kind);
    v.message = column_as<std::string>(message, "message")[i];
    v.trials_run = static_cast<int>(column_as<int64_t>(trials_run, "trials_run")[i]);
    v.trials_passed = static_cast<int>(column_as<int64_t>(trials_passed, "trials_passed")[i]);
    v.reference_time = {column_as<double>(rm, "reference_median_us")[i], column_as<double>(ri, "reference_iqr_us")[i],
                        static_cast<int>(column_as<int64_t>(rs, "reference_samples")[i])};
    v.candidate_time = {column_as<double>(cm, "candidate_median_us")[i], column_as<double>(ci, "candidate_iqr_us")[i],
                        static_cast<int>(column_as<int64_t>(cs, "candidate_samples")[i])};
    v.speedup = column_as<double>(sp, "speedup")[i];
    v.speedup_ci_low = column_as<double>(lo, "speedup_ci_low")[i];
    v.speedup_ci_high = column_as<double>(hi, "speedup_ci_high")[i];
    v.reward = column_as<double>(reward, "reward")[i];
    v.seconds = column_as<double>(seconds, "seconds")[i];
    // "" where a column was added to an older file: its rows were judged before the column existed.
    if (has_baseline && !column_as<std::string>(baseline, "baseline")[i].empty()) {
      v.baseline = column_as<std::string>(baseline, "baseline")[i];
    }
    if (has_format && !column_as<std::string>(format, "format")[i].empty()) v.format = column_as<std::string>(format, "format")[i];
    if (has_params && !column_as<std::string>(params, "params")[i].empty()) v.params = column_as<std::string>(params, "params")[i];
    v.compile_log = reader.text(kCompileLogStore, id).value_or("");
    v.worker_log = reader.text(kWorkerLogStore, id).value_or("");
    const auto steps = nlohmann::json::parse(reader.text(kStepsStore, id).value_or("[]"), nullptr, false);
    if (!steps.is_array()) throw InputError(fmt::format("verdict row {}: its steps are not a JSON array", id));
    for (const auto& s : steps) {
      v.steps.push_back({s.value("name", ""), s.value("passed", false), s.value("detail", ""), s.value("seconds", 0.0)});
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace crl::eval
