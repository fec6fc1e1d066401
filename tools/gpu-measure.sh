#!/usr/bin/env bash
# On the GPU machine, in one call: builds the evaluation targets against that machine's torch,
# runs their gpu-labelled tests, checks chosen full-scale references and runs the compile and
# evaluation benchmarks, each step under its own time limit, logging to $OUT (or results/gpu-measure).
# Usage: tools/gpu-measure.sh [task-id ...]   (the tasks for `crl tasks check --scale full`)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu-measure}
mkdir -p "$OUT"
BUILD_DIR=${CRL_BUILD_DIR:-build-gpu}
if [ -d .carry/debs ]; then  # utf8proc is not installed there (see tools/gpu-build.sh)
  mkdir -p .carry/prefix
  for deb in .carry/debs/*.deb; do dpkg -x "$deb" .carry/prefix; done
  export LD_LIBRARY_PATH="$PWD/.carry/prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
step() {  # step NAME SECONDS COMMAND...: runs it with a limit (LIMIT_<NAME> overrides), logs to $OUT/NAME.log
  local name=$1 limit_var="LIMIT_$1"; local limit=${!limit_var:-$2}; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - start)) s" | tee -a "$OUT/steps.txt"
}
step configure 120 cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')" \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DTORCH_CUDA_ARCH_LIST=9.0a -DCRL_BUILD_BENCHMARKS=ON
step build 300 cmake --build "$BUILD_DIR" -j"$(nproc)" --target crl crl-worker program_gpu_test compile_gpu_test \
  compile_cuda_test eval_evaluator_gpu_test eval_guard_fixtures_gpu_test bench_compile bench_eval
# Each test program runs whole, in one process, not test by test as ctest would: its evaluator's
# workers, compile cache and reference outputs then serve all of its tests (ctest spent ~20 s of
# process and CUDA start-up per test). One program at a time: several of them time programs.
step guard_fixtures_gpu 240 "$BUILD_DIR/tests/eval/eval_guard_fixtures_gpu_test"
step evaluator_gpu 180 "$BUILD_DIR/tests/eval/eval_evaluator_gpu_test"
step compile_gpu 120 "$BUILD_DIR/tests/compile/compile_gpu_test"
step compile_cuda 120 "$BUILD_DIR/tests/compile/compile_cuda_test"
step program_gpu 60 "$BUILD_DIR/tests/program/program_gpu_test"
if [ $# -gt 0 ]; then
  args=()
  for task in "$@"; do args+=(--task "$task"); done
  step tasks_check_full 180 "$BUILD_DIR/apps/crl/crl" tasks check --scale full --backend cuda "${args[@]}" --json
fi
step bench_compile 120 "$BUILD_DIR/bench/bench_compile" --benchmark_format=json
CRL_BENCH_TIME_BUDGET=${CRL_BENCH_TIME_BUDGET:-2} step bench_eval 240 "$BUILD_DIR/bench/bench_eval" --benchmark_format=json
