// Logging through spdlog with the process's rank in every line.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace crl {

// Sets spdlog's default logger pattern (time, rank, level) and level ("debug", "info", "warn", ...).
void init_logging(const std::string& level = "info");

}  // namespace crl
