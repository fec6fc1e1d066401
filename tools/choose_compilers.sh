#!/usr/bin/env bash
# Prints the CMake options naming the compilers of a new crl build folder (tools/setup.sh, tools/build_profile.sh).
# clang where it works (tools/setup.sh installs it), else nothing (CMake's default, the system's c++).
# With clang the shared precompiled LibTorch header keeps its instantiated templates, so crl's
# LibTorch files compile in about half of g++'s CPU time (docs/building.md).
# Env: CRL_CXX (and CRL_CC) choose the compilers instead: CRL_CXX=g++ for GCC.
set -euo pipefail
cxx=${CRL_CXX:-}
if [ -z "$cxx" ] && command -v clang++ >/dev/null &&
   printf '#include <span>\nint main() { return 0; }\n' | clang++ -std=c++20 -x c++ - -o /dev/null 2>/dev/null; then
  cxx=clang++
fi
[ -n "$cxx" ] || exit 0
cc=${CRL_CC:-}
if [ -z "$cc" ]; then
  case "$cxx" in
    *clang++*) cc=${cxx/clang++/clang} ;;
    *g++*) cc=${cxx/g++/gcc} ;;
    *) cc=cc ;;
  esac
fi
echo "-DCMAKE_CXX_COMPILER=$cxx -DCMAKE_C_COMPILER=$cc"
