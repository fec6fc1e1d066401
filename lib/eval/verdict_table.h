// Verdicts as rows of an HDF5 results table (lib/results): one row per verdict in table
// `verdicts`; its compile and worker logs and check steps go to text stores keyed by the row.
#pragma once

#include <string>
#include <vector>

#include "eval/verdict.h"
#include "results/results_reader.h"
#include "results/results_writer.h"

namespace crl::eval {

inline constexpr const char* kVerdictTable = "verdicts";

// Columns: row, task, candidate, backend, scale, status, message, trials_run, trials_passed,
// reference_median_us, reference_iqr_us, reference_samples, candidate_median_us, candidate_iqr_us,
// candidate_samples, speedup, speedup_ci_low, speedup_ci_high, reward, seconds, baseline (files
// written before it existed read as "eager"), speedup_ci_half_width (relative; 0 when not timed;
// written for readers, not read back: a verdict derives it from its interval), format (the
// candidate's kind, "crl" or "kernelbench"; files written before it existed read as "crl"), params
// (the parameters' rule, "crl" or "kernelbench": EvalOptions::kernelbench_dir; older files: "crl").
const results::TableSchema& verdict_table_schema();

// Appends the verdicts (declaring the table on first use) and stores each one's compile log,
// worker log and steps (JSON) under text stores verdict_compile_log, verdict_worker_log,
// verdict_steps, keyed by its `row` column, and, where `programs` is given (one text per verdict),
// the candidate's program text under verdict_program. Returns the first new row's number. Does
// not flush.
int64_t append_verdicts(results::ResultsWriter& writer, const std::vector<Verdict>& verdicts,
                        const std::vector<std::string>& programs = {});

// Reads every verdict back (logs and steps included); InputError when the table is malformed.
std::vector<Verdict> read_verdicts(const results::ResultsReader& reader);

}  // namespace crl::eval
