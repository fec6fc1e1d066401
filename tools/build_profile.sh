#!/usr/bin/env bash
# Builds crl in a fresh folder with every compile and link timed, and prints CPU seconds per target group.
# Usage: tools/build_profile.sh [--json] [--jobs N] [--source DIR] BUILD_DIR [TARGET...]
#   BUILD_DIR must not exist (a profile is of a build from nothing); TARGETs default to all.
#   --source DIR profiles another checkout (an older commit, for a before/after figure).
# The build runs without ccache (CCACHE_DISABLE), so each step costs what it costs a fresh machine's
# first build. Prints the wall time, then per group (lib, apps, tests, bench, pch, other) the steps
# and CPU seconds of compiles and links, and the costliest steps; --json prints it as one object.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
json=""; jobs=$(nproc); source_dir="$(dirname "$here")"
while [ $# -gt 0 ]; do
  case "$1" in
    --json) json=--json; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    --source) source_dir=$(cd "$2" && pwd); shift 2 ;;
    -*) echo "build_profile: unknown option '$1'" >&2; exit 3 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "usage: tools/build_profile.sh [--json] [--jobs N] [--source DIR] BUILD_DIR [TARGET...]" >&2; exit 3; }
build_dir=$1; shift
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(all)
if [ -e "$build_dir" ]; then
  echo "build_profile: $build_dir exists; a profile is of a build from nothing (remove it or name another)" >&2
  exit 3
fi
mkdir -p "$build_dir"
build_dir=$(cd "$build_dir" && pwd)
export CRL_BUILD_PROFILE_OUT="$build_dir/build_profile.tsv"
export CCACHE_DISABLE=1
# The recorder stands in for ccache: cmake/CrlCompilerCache.cmake launches every compile through
# whatever CRL_CCACHE names; links get it as CMake's linker launcher.
# The compilers setup.sh would choose (CRL_CXX/CRL_CC choose others).
# shellcheck disable=SC2046  # two words: the compiler options
cmake -S "$source_dir" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $("$here/choose_compilers.sh") \
  -DCRL_CCACHE="$here/build_profile_record.sh" -DCMAKE_CXX_LINKER_LAUNCHER="$here/build_profile_record.sh" >"$build_dir/configure.log"
start=$(date +%s.%N)
cmake --build "$build_dir" -j"$jobs" --target "${targets[@]}" >"$build_dir/build.log"
end=$(date +%s.%N)
wall=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
compiler=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
python3 "$here/build_profile_report.py" $json --wall "$wall" --jobs "$jobs" --targets "${targets[*]}" --compiler "$compiler" "$CRL_BUILD_PROFILE_OUT"
