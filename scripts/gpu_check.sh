#!/usr/bin/env bash
# The GPU device on a real OpenCL GPU (an NVIDIA card through its OpenCL driver), in one run of under 8 minutes:
# finds the GPU's OpenCL driver, installs specgrad where it is not importable yet, runs the GPU test tier and
# `specgrad bench --device GPU` (the matmul rows again without work-groups), and writes everything to one file.
#
#   bash scripts/gpu_check.sh [RESULTS_FILE]    # default: gpu_check_results.txt (or $OUT/gpu_check_results.txt)
#
# The suite never needs a GPU; this is how its figures in docs/performance.md ("On a GPU") are made.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:+$OUT/}gpu_check_results.txt}"
: > "$out"
start=$SECONDS
say() { echo "$*" | tee -a "$out"; }
phase() { say ""; say "=== $1 ($((SECONDS - start)) s in)"; }

phase "machine"
{ uname -a; nproc; command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } 2>&1 | tee -a "$out"

# NOTE: pyopencl's own ICD loader reads /etc/OpenCL/vendors; a container with the NVIDIA driver often lacks the
# vendor file, so one is written to a private folder (OCL_ICD_VENDORS) when the driver's library is found
if [ -z "${OCL_ICD_VENDORS:-}" ] && ! ls /etc/OpenCL/vendors/*nvidia* >/dev/null 2>&1; then
  lib=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl.so.1/ {print $NF; exit}')
  [ -z "$lib" ] && lib=$(find / -name 'libnvidia-opencl.so.1' -not -path '*/proc/*' 2>/dev/null | head -1)
  if [ -n "$lib" ]; then
    vendors=$(mktemp -d)
    echo "$lib" > "$vendors/nvidia.icd"
    export OCL_ICD_VENDORS="$vendors"
    say "OpenCL: the NVIDIA driver's $lib, through $vendors/nvidia.icd"
  fi
fi

phase "install"
if ! python -c "import specgrad, pyopencl, pytest" >/dev/null 2>&1; then
  timeout 90 pip install -q -e ".[dev]" 2>&1 | tail -5 | tee -a "$out"
fi
python - <<'EOF' 2>&1 | tee -a "$out"
import pyopencl as cl
for p in cl.get_platforms():
    for d in p.get_devices():
        kind = "GPU" if d.type & cl.device_type.GPU else "CPU" if d.type & cl.device_type.CPU else "other"
        print(f"{p.name.strip()}: {d.name.strip()} ({kind}), {d.max_compute_units} compute units, local memory "
              f"{d.local_mem_size // 1024} KiB, work-groups up to {d.max_work_group_size}, float{d.preferred_vector_width_float} preferred")
EOF
device=$(python -c "from specgrad import Device; print(Device['GPU'].description)" 2>&1)
say "specgrad's GPU device:$device"
say "its work-groups: $(python -c "from specgrad.runtime.ops_gpu import CLContext; print(CLContext().work_groups() or 'none (not a GPU with local memory): the runtime picks group sizes')" 2>&1)"
case "$device" in
  *"Portable Computing Language"*) say "warning: the GPU device is PoCL on the CPU, not a GPU: no OpenCL GPU was found" ;;
esac

phase "the GPU test tier (tests with GPU in their name and tests/test_work_groups.py, fast tier)"
timeout 200 python -m pytest -q -k "GPU or work_groups" -p no:cacheprovider 2>&1 | tail -30 | tee -a "$out"

phase "specgrad bench --device GPU"
timeout 130 specgrad bench --device GPU --seconds 0.3 2>&1 | tee -a "$out"

phase "matmul without work-groups and local-memory tiles (CL_WORK_GROUPS=0), to compare with the rows above"
CL_WORK_GROUPS=0 timeout 45 specgrad bench --device GPU --seconds 0.3 --only matmul 2>&1 | tee -a "$out"

phase "done"
say "results in $out"
