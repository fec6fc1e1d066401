// merge_results_files: joins crl results files (the parts of an evaluation sweep run as a Slurm job
// array, say) into one new file, with ids kept unique and every part's /meta kept.
//
// Ids: the int64 columns named `row`, `id` or ending in `_id`, the comma-separated ids of string
// columns ending in `_ids` (a rollout's exemplar_ids) and the keys of text stores. Each part's ids
// are shifted by one offset, the sum over the parts before it of (their largest id + 1), so a text
// store still points at its row; negative ids mean "none" and stay as they are. Tables of the same name must have the same schema in every part.
// /meta of the merged file: `merged_parts`, a JSON array with, for each part in order, its file,
// id offset, rows per table and its whole /meta (key -> string); and each key whose value is the
// same in every part that has it, as it was.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace crl::results {

struct MergedPart {
  std::string path;
  std::int64_t id_offset = 0;
  std::map<std::string, std::int64_t> rows;   // per table
  std::map<std::string, std::int64_t> texts;  // per text store
};

struct MergeSummary {
  std::string path;
  std::vector<MergedPart> parts;
  std::map<std::string, std::int64_t> rows;   // per table, over all parts
  std::map<std::string, std::int64_t> texts;  // per text store, over all parts
};

nlohmann::json to_json(const MergeSummary& summary);

// Called after each part is written (and flushed): parts done so far, parts in all, that part.
using MergeProgress = std::function<void(std::size_t done, std::size_t total, const MergedPart& part)>;

// Writes `out_path`, which must not exist yet, from `part_paths` (at least one, each a crl results
// file, none given twice). InputError naming the part for a part that is not a results file, a
// table whose schema differs from the first part's, or ids past int64. Every part is checked
// before anything is written.
MergeSummary merge_results_files(const std::string& out_path, const std::vector<std::string>& part_paths,
                                 const MergeProgress& progress = {});

}  // namespace crl::results
