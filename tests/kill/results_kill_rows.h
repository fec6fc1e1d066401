// The rows, texts and flags results_kill_writer writes per step, shared with the test that checks
// them after each kill.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "results/table_schema.h"

namespace crl::kill_test {

inline const results::TableSchema kSchema = {{"rollout", results::ColumnType::int64},
                                             {"speedup", results::ColumnType::float64},
                                             {"ok", results::ColumnType::boolean},
                                             {"program", results::ColumnType::string},
                                             {"redone", results::ColumnType::boolean}};
inline constexpr std::int64_t kRowsPerStep = 3;

inline std::string program(std::int64_t id) {
  // Lengths that differ row to row, so HDF5's global heap grows, splits and is reused.
  return fmt::format("program {} ✓ {}", id, std::string(static_cast<std::size_t>(37 * (id % 5)), 'p'));
}

inline std::string completion(std::int64_t step) {
  return fmt::format("completion of step {}: {}", step, std::string(static_cast<std::size_t>(500 + 700 * (step % 3)), 'c'));
}

inline results::RowBatch step_rows(std::int64_t step) {
  results::RowBatch batch(kSchema);
  for (std::int64_t i = 0; i < kRowsPerStep; ++i) {
    const std::int64_t id = step * kRowsPerStep + i;
    batch.add_row({id, 0.5 * static_cast<double>(id), id % 2 == 0, program(id), false});
  }
  return batch;
}

}  // namespace crl::kill_test
