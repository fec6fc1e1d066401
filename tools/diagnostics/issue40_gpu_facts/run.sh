#!/usr/bin/env bash
# Builds and runs issue 40's GPU-fact diagnostics on a GPU machine; results into $OUT (default .):
# ipc_forgery.json and idle_probe_timeslice.jsonl. Needs nvcc and the CUDA driver; no crl build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-.}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch=${CUDA_ARCH:-sm_90}
build=$(mktemp -d)
for tool in ipc_forgery idle_probe_timeslice; do
  "$nvcc" -O2 -arch="$arch" -o "$build/$tool" "$here/$tool.cu" -lcuda
done
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | tee "$out/gpu.txt"
timeout 120 "$build/ipc_forgery" | tee "$out/ipc_forgery.json"
timeout 180 "$build/idle_probe_timeslice" | tee "$out/idle_probe_timeslice.jsonl"
