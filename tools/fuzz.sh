#!/usr/bin/env bash
# Builds crl's libFuzzer harnesses (tests/fuzz: one per parser) with clang, address and undefined-
# behaviour sanitizers into build-fuzz/, then runs each on its committed seed corpus
# (tests/fuzz/corpus/<harness>/, regression inputs included) for a bounded time. Python harnesses
# (tests/fuzz/<harness>.py: atheris, on the analysis code) run with the analysis venv's Python, and
# are skipped, saying so, where atheris is not installed there.
#
#   tools/fuzz.sh [--seconds N] [--jobs J] [harness ...]     (default: 25 s each, 2 at a time, all)
#
# New inputs go to build-fuzz/work/<harness>/ (the committed corpus is only read); a crash is
# written to build-fuzz/findings/<harness>-crash-*; add it to the corpus with its fix. Exit 0: no
# finding; 1: a harness failed (its log is printed); 77: skipped, clang's fuzzer runtime is missing
# (install clang and libclang-rt-<version>-dev).
set -euo pipefail

cd "$(dirname "$0")/.."
seconds=25
jobs=2
harnesses=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done

build=build-fuzz
cxx="${CRL_FUZZ_CXX:-clang++}"
probe_dir="$(mktemp -d)"
trap 'rm -r "$probe_dir"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe_dir/p.cpp"
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz: SKIPPED: no $cxx (install clang and libclang-rt-dev of the same version)"; exit 77
fi
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe_dir/p.cpp" -o "$probe_dir/p" 2>"$probe_dir/err"; then
  echo "fuzz: SKIPPED: $cxx cannot link -fsanitize=fuzzer (install libclang-rt-$("$cxx" -dumpversion | cut -d. -f1)-dev):"
  head -3 "$probe_dir/err"; exit 77
fi

if [[ ! -f $build/build.ninja ]]; then
  cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
fi
native=()
for name in "${harnesses[@]}"; do [[ -f tests/fuzz/$name.py ]] || native+=("$name"); done
if [[ ${#harnesses[@]} -eq 0 || ${#native[@]} -gt 0 ]]; then
  cmake --build "$build" -j "$jobs" ${native:+--target "${native[@]}"}
fi

if [[ ${#harnesses[@]} -eq 0 ]]; then
  for dir in tests/fuzz/corpus/*/; do harnesses+=("$(basename "$dir")"); done
fi
venv_python="${CRL_HOME:-$HOME/.local/share/crl}/venv/bin/python3"
mkdir -p "$build/findings" "$build/logs"

run_one() {
  local name="$1" leaks=1
  if [[ -f tests/fuzz/$name.py ]]; then
    mkdir -p "$build/work/$name"
    "$venv_python" "tests/fuzz/$name.py" -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$build/findings/$name-" \
      "$build/work/$name" "tests/fuzz/corpus/$name" >"$build/logs/$name.log" 2>&1
    return
  fi
  [[ $name == fuzz_worker_channel ]] && leaks=0  # LibTorch keeps its allocations to process exit
  mkdir -p "$build/work/$name"
  ASAN_OPTIONS="detect_leaks=$leaks:allocator_may_return_null=0" UBSAN_OPTIONS="print_stacktrace=1" \
    "$build/$name" -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build/findings/$name-" \
    "$build/work/$name" "tests/fuzz/corpus/$name" >"$build/logs/$name.log" 2>&1
}

failed=()
running=0
pids=()
names=()
skipped=()
for name in "${harnesses[@]}"; do
  if [[ -f tests/fuzz/$name.py ]]; then
    if ! "$venv_python" -c 'import atheris, h5py, pandas' 2>/dev/null; then
      echo "fuzz: $name: SKIPPED: $venv_python lacks atheris, h5py or pandas (tools/setup.sh installs them)"
      skipped+=("$name"); continue
    fi
  elif [[ ! -x $build/$name ]]; then
    echo "fuzz: no harness $name"; exit 2
  fi
  run_one "$name" & pids+=($!); names+=("$name")
  running=$((running + 1))
  if (( running >= jobs )); then
    wait "${pids[0]}" || failed+=("${names[0]}")
    pids=("${pids[@]:1}"); names=("${names[@]:1}"); running=$((running - 1))
  fi
done
for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed+=("${names[$i]}"); done

for name in "${harnesses[@]}"; do
  [[ " ${skipped[*]} " == *" $name "* ]] && continue
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$build/logs/$name.log" | awk '{print $2}')
  echo "fuzz: $name: ${runs:-?} runs in ${seconds} s$([[ " ${failed[*]} " == *" $name "* ]] && echo ': FAILED')"
done
for name in "${failed[@]}"; do
  echo "---- $build/logs/$name.log"; grep -A40 -m1 'ERROR\|runtime error\|deadly signal\|uncaught' "$build/logs/$name.log" | head -60
done
[[ ${#failed[@]} -eq 0 ]]
