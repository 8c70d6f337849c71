#!/usr/bin/env bash
# Everything the open issues' "Must show" asks of a GPU machine, in four calls that each fit
# the device tool's 10-minute limit. Run from the repository root on the GPU machine; logs go
# to $OUT (or ./gpu_out). Wheels for the 12.9 run and NCCL come from ./.whl (carry it; make it
# with `bash tools/gpu_cu12.sh --prepare` and `pip download --no-deps -d .whl/nccl nccl4py`).
#
#   bash tools/gpu_verify.sh suites   # build the compiled path; GPU suite compiled and ctypes (1 GPU)
#   bash tools/gpu_verify.sh cu12     # GPU suite on cuda-bindings 12.9 + NVRTC 12; soak      (1 GPU)
#   bash tools/gpu_verify.sh show     # demo, demo --decode, demo --torch; benchmarks twice (1 GPU)
#   (cu12only, demos, bench: the parts of cu12 and show alone, for reruns)
#   bash tools/gpu_verify.sh multi    # multi-GPU tests, NCCL, examples, tp benchmark  (2 GPUs)
set -uo pipefail
out=${OUT:-gpu_out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { echo "== $1"; }
summary() { grep -E "passed|failed|error" "$1" | tail -1; }

case "${1:-}" in
suites)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    step "build the compiled hot path in place"
    python3 setup.py build_ext --inplace > "$out/build.log" 2>&1; echo "build rc=$?"
    python3 -m pycudagraph info > "$out/info.txt" 2>&1; grep -iE "hot path|bindings|nvrtc|driver" "$out/info.txt"
    step "GPU suite, compiled path"
    timeout 260 python3 -m pytest -m gpu -q -rs -p no:cacheprovider > "$out/gpu_native.log" 2>&1; summary "$out/gpu_native.log"
    step "GPU suite, ctypes path (PYCUDAGRAPH_NO_NATIVE=1)"
    PYCUDAGRAPH_NO_NATIVE=1 timeout 260 python3 -m pytest -m gpu -q -rs -p no:cacheprovider > "$out/gpu_ctypes.log" 2>&1; summary "$out/gpu_ctypes.log"
    grep -h -E "^(FAILED|ERROR)" "$out"/gpu_*.log | head -30
    ;;
cu12)
    python3 setup.py build_ext --inplace > "$out/build.log" 2>&1; echo "build rc=$?"
    step "GPU suite, cuda-bindings 12.9 + NVRTC 12 (compiled path)"
    timeout 360 bash tools/gpu_cu12.sh -m gpu -q -rs -p no:cacheprovider > "$out/gpu_cu12.log" 2>&1
    grep -iE "loaded|bindings" "$out/gpu_cu12.log" | head -4; summary "$out/gpu_cu12.log"
    step "soak"
    timeout 90 python3 tools/soak.py > "$out/soak.log" 2>&1; tail -6 "$out/soak.log"
    grep -h -E "^(FAILED|ERROR)" "$out"/gpu_*.log | head -30
    ;;
cu12only)
    python3 setup.py build_ext --inplace > "$out/build.log" 2>&1; echo "build rc=$?"
    timeout 360 bash tools/gpu_cu12.sh -m gpu -q -rs -p no:cacheprovider > "$out/gpu_cu12.log" 2>&1
    grep -iE "loaded|bindings" "$out/gpu_cu12.log" | head -2; summary "$out/gpu_cu12.log"
    grep -h -E "^(FAILED|ERROR)" "$out/gpu_cu12.log" | head -30
    ;;
demos)
    for mode in "" --decode --torch; do
        step "demo $mode"
        timeout 150 python3 -m pycudagraph demo $mode --out "$out/demo" > "$out/demo${mode#--}.txt" 2>&1
        echo "rc=$?"; tail -14 "$out/demo${mode#--}.txt"
    done
    ;;
bench)
    for run in A B; do
        step "benchmarks, run $run"
        timeout 280 python3 -m benchmarks --out "$out/bench_$run" > "$out/bench_$run.txt" 2>&1
        echo "rc=$?"; tail -30 "$out/bench_$run.txt"
    done
    ;;
show)
    for mode in "" --decode --torch; do
        step "demo $mode"
        timeout 150 python3 -m pycudagraph demo $mode --out "$out/demo" > "$out/demo${mode#--}.txt" 2>&1
        echo "rc=$?"; tail -14 "$out/demo${mode#--}.txt"
    done
    for run in A B; do
        step "benchmarks, run $run"
        timeout 200 python3 -m benchmarks --out "$out/bench_$run" > "$out/bench_$run.txt" 2>&1
        echo "rc=$?"; tail -24 "$out/bench_$run.txt"
    done
    ;;
multi)
    nvidia-smi -L
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/nccl/*.whl > /dev/null 2>&1 \
        || echo "nccl4py wheel not installed (NCCL tests use CuPy's binding or skip)"
    export PYTHONPATH=/tmp/site:$PYTHONPATH
    step "multi-GPU tests"
    timeout 300 python3 -m pytest -q -rs -p no:cacheprovider tests/multi_gpu \
        tests/runtime/test_device.py > "$out/multi.log" 2>&1
    summary "$out/multi.log"; grep -E "^(FAILED|ERROR)" "$out/multi.log" | head
    for ex in examples/multi_gpu_*.py; do
        step "$ex"; timeout 60 python3 "$ex" > "$out/$(basename "$ex" .py).txt" 2>&1; echo "rc=$?"
        tail -6 "$out/$(basename "$ex" .py).txt"
    done
    step "benchmark group tp"
    timeout 120 python3 -m benchmarks --only tp --peers pcg --out "$out/bench_tp" > "$out/bench_tp.txt" 2>&1
    echo "rc=$?"; tail -8 "$out/bench_tp.txt"
    ;;
*)
    sed -n '2,10p' "$0"; exit 2 ;;
esac
