// The compile cache that every test binary shares (in the build tree), so reruns are fast.
#pragma once

#include <string>

namespace crl::testing {

// One cache for all tests: each cache builds its own precompiled LibTorch prelude (~25 s of CPU,
// 370 MB) and would compile the same references again; the compiler's node lock makes concurrent
// tests safe. tests/compile uses it too (its programs carry unique tags, so each is a miss).
inline std::string shared_test_cache_dir() { return std::string(CRL_BINARY_DIR) + "/test-cache/shared"; }

}  // namespace crl::testing
