// Aligned plain-text tables for terminal output of listing and report commands.
#pragma once

#include <string>
#include <vector>

namespace crl {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header);
  void add_row(std::vector<std::string> row);  // a row shorter than the header is padded
  std::string str() const;                     // header, a rule, rows; columns padded to width

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace crl
