// Which backend a command that runs programs uses (crl eval, crl data validate, crl tasks check):
// the one --backend names, else CUDA where a GPU is visible; CUDA asked for where none is visible is
// refused before any work, not found out by the first worker half a minute later.
#pragma once

#include <string>

#include "compile/compiler.h"

namespace crl::cli {

// `option` is --backend's value ("" when not given). Throws InputError naming --backend and what
// to do when it is "cuda" and no CUDA device is visible to this process.
Backend choose_backend(const std::string& option);

}  // namespace crl::cli
