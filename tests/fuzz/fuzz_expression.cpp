// libFuzzer harness: spec expressions on their own. The first 8 bytes (if present) give the value
// of variable `n`, the rest is the expression; integer and double evaluation both run.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"
#include "program/expression.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int64_t n = 3;
  if (size >= 8) {
    std::memcpy(&n, data, 8);
    data += 8;
    size -= 8;
  }
  const std::string text(reinterpret_cast<const char*>(data), size);
  const crl::ScaleVariables variables = {{"n", n}, {"m", INT64_MIN}, {"big", INT64_MAX}};
  try {
    const crl::Expr expr = crl::Expr::parse(text, "fuzz:1");
    try {
      expr.evaluate(variables);
    } catch (const crl::InputError&) {
    }
    expr.evaluate_integer(variables);
  } catch (const crl::InputError&) {
  }
  return 0;
}
