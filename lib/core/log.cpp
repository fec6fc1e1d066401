// spdlog set-up: messages go to stderr so stdout stays clean for tables and --json.
#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/process_env.h"

namespace crl {

void init_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("crl");
  const auto place = launch_place();
  const std::string who = place.rank >= 0 ? fmt::format("[rank {}] ", place.rank) : "";
  logger->set_pattern("[%H:%M:%S.%e] " + who + "%^%l%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace crl
