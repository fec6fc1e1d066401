#!/usr/bin/env bash
# On the GPU machine: configure against that machine's own torch, build with all cores, run every
# test including the `gpu` label. Usage: tools/gpu-build.sh [ctest args...]   (writes $OUT/ if set)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${CRL_BUILD_DIR:-build-gpu}
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
ARCH=${CRL_CUDA_ARCH:-90a}
# utf8proc is not installed there: unpack the .debs carried in .carry/debs (apt-get download
# libutf8proc-dev libutf8proc2) into .carry/prefix, where cmake/CrlDependencies.cmake looks.
if [ -d .carry/debs ]; then
  mkdir -p .carry/prefix
  for deb in .carry/debs/*.deb; do dpkg -x "$deb" .carry/prefix; done
  export LD_LIBRARY_PATH="$PWD/.carry/prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
  -DTORCH_CUDA_ARCH_LIST="9.0a" -DCRL_BUILD_BENCHMARKS=ON || exit 1
cmake --build "$BUILD_DIR" -j"$(nproc)" || exit 1
"$BUILD_DIR/apps/crl/crl" doctor
ctest --test-dir "$BUILD_DIR" --output-on-failure -j4 "$@"
