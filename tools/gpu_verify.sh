#!/usr/bin/env bash
# Everything the open issues' "Must show" asks of a GPU machine, in calls that each fit the
# device tool's 10-minute limit. Run from the repository root on the GPU machine; logs go
# to $OUT (or ./gpu_out). Wheels for the 12.9 run and NCCL come from ./.whl (carry it; make it
# with `bash tools/gpu_cu12.sh --prepare` and `pip download --no-deps -d .whl/nccl nccl4py`;
# nccl4py needs cuda-pathfinder>=1.5.4: `pip download --no-deps -d .whl/nccl-deps
# "cuda-pathfinder>=1.5.4,<2"`, installed only where the machine's is older).
#
#   bash tools/gpu_verify.sh suites   # build the compiled path; GPU suite compiled and ctypes (1 GPU)
#   bash tools/gpu_verify.sh cu12     # GPU suite on cuda-bindings 12.9 + NVRTC 12; soak      (1 GPU)
#   bash tools/gpu_verify.sh show     # demo, demo --decode, demo --torch; benchmarks twice (1 GPU)
#   bash tools/gpu_verify.sh h2h      # build; hot-path tests; benchmarks head to head, 3 runs (1 GPU):
#                                   # run1..3.json, summary.json, tables.md, h2h.log, tests.log
#   (cu12only, demos, bench: the parts of cu12 and show alone, for reruns)
#   bash tools/gpu_verify.sh final-suites   # the GPU suite three ways at once: compiled,
#                                   # PYCUDAGRAPH_NO_NATIVE=1, cuda-bindings 12.9 (carry .whl) (1 GPU)
#   bash tools/gpu_verify.sh pair-suites    # on 2 GPUs: the GPU suite compiled on GPU 0 and
#                                   # PYCUDAGRAPH_NO_NATIVE=1 on GPU 1 at once (carry .whl for CUPTI)
#   bash tools/gpu_verify.sh final-bench [RUNS]  # pycudagraph before (./.before, a copy of an
#                                   # earlier commit) and after, twice each, alternating; then
#                                   # python -m benchmarks --runs RUNS (default 3); the soak (1 GPU)
#   bash tools/gpu_verify.sh split-ab [ALTERNATIONS] [ROUNDS]  # instantiate / update
#                                   # bookkeeping before (./.before) and after, alternating
#                                   # (benchmarks/profile_split.py; default 4 x 60 rounds) (1 GPU)
#   bash tools/gpu_verify.sh multi    # multi-tests, then multi-bench, on the GPUs present
#   bash tools/gpu_verify.sh multi-tests [N]  # tests/multi_gpu at 2, 4, 8 GPUs (N: only N) (2+ GPUs)
#   bash tools/gpu_verify.sh multi-bench [quick]  # setup check, graph, NCCL and PyTorch examples
#                                   # on all GPUs; graphs sharing a communicator (serialize, refuse)
#                                   # and an all-reduce in if_ / while_ bodies (multi_gpu_nccl_order);
#                                   # the scaling table (benchmarks.tp_step) (2+ GPUs)
#   On 8 GPUs run multi-tests and multi-bench as two calls (both together may not fit 10
#   minutes); if multi-tests runs long, split it by count: multi-tests 2, 4, 8.
set -uo pipefail
out=${OUT:-gpu_out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { echo "== $1"; }
multi_setup() {  # the GPUs, their links, nccl4py from ./.whl/nccl, the multicast switches
    nvidia-smi -L | tee "$out/gpus.txt"
    nvidia-smi topo -m > "$out/topo.txt" 2>&1
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/nccl/*.whl > /dev/null 2>&1 \
        || echo "nccl4py wheel not installed (NCCL tests use CuPy's binding or skip)"
    python3 -c "import cuda.pathfinder as p, sys; from packaging.version import Version as V; \
sys.exit(V(p.__version__) < V('1.5.4'))" 2>/dev/null || python3 -m pip install -q --no-index \
        --no-deps --target /tmp/site .whl/nccl-deps/*.whl > /dev/null 2>&1
    export PYTHONPATH=/tmp/site:$PYTHONPATH
    echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS"
}
summary() { grep -E "passed|failed|error" "$1" | tail -1; }

case "${1:-}" in
final-suites)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 setup.py build_ext --inplace > "$out/build.log" 2>&1; echo "build rc=$?"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
        .whl/cupti/*.whl >> "$out/build.log" 2>&1 && export PYTHONPATH=$PYTHONPATH:/tmp/site
    args=(-m gpu -q -rs -p no:cacheprovider)
    PYCUDAGRAPH_NO_NATIVE=1 timeout 520 python3 -m pytest "${args[@]}" > "$out/gpu_ctypes.log" 2>&1 &
    ctypes_pid=$!
    timeout 520 bash tools/gpu_cu12.sh "${args[@]}" > "$out/gpu_cu12.log" 2>&1 &
    cu12_pid=$!
    timeout 520 python3 -m pytest "${args[@]}" > "$out/gpu_native.log" 2>&1
    wait $ctypes_pid $cu12_pid
    for log in native ctypes cu12; do echo "$log: $(summary "$out/gpu_$log.log")"; done
    grep -iE "^cuda-bindings|^NVRTC" "$out/gpu_cu12.log" | head -2
    grep -h -E "^(FAILED|ERROR)" "$out"/gpu_*.log | head -30
    ;;
pair-suites)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 setup.py build_ext --inplace > "$out/build.log" 2>&1; echo "build rc=$?"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
        .whl/cupti/*.whl >> "$out/build.log" 2>&1 && export PYTHONPATH=$PYTHONPATH:/tmp/site
    args=(-m gpu -q -rs -p no:cacheprovider ${PCG_PYTEST_ARGS:-})
    CUDA_VISIBLE_DEVICES=1 PYCUDAGRAPH_NO_NATIVE=1 timeout ${PCG_SUITE_LIMIT:-400} \
        python3 -m pytest "${args[@]}" > "$out/gpu_ctypes.log" 2>&1 &
    ctypes_pid=$!
    CUDA_VISIBLE_DEVICES=0 timeout ${PCG_SUITE_LIMIT:-400} python3 -m pytest "${args[@]}" \
        > "$out/gpu_native.log" 2>&1
    wait $ctypes_pid
    for log in native ctypes; do echo "$log: $(summary "$out/gpu_$log.log")"; done
    grep -h -E "^(FAILED|ERROR)" "$out"/gpu_*.log | sort | uniq -c | head -40
    ;;
final-bench)
    # Before and after through the same runner: the earlier commit's benchmarks (a copy in
    # ./.before) time the earlier package (./.before) and this one, twice each, alternating.
    old=/tmp/oldbench; rm -rf $old; mkdir -p $old; cp -r .before/benchmarks .before/kernels $old/
    (cd .before && python3 setup.py build_ext --inplace > /dev/null 2>&1)
    python3 setup.py build_ext --inplace > /dev/null 2>&1
    groups=held_launch,eager,set_arg,set_all,build,instantiate,recapture
    for run in A B; do
        for side in before after; do
            pkg=$PWD; [[ $side == before ]] && pkg=$PWD/.before
            step "pycudagraph $side ($run)"
            (cd $old && PYTHONPATH=$old:$pkg timeout 90 python3 -m benchmarks --only $groups \
                --peers pcg --out /tmp/b_${side}_$run) >> "$out/bench_before_after.txt" 2>&1
        done
    done
    grep -E "^\|" "$out/bench_before_after.txt" | grep -iE "pycudagraph|held|update|build|instantiate|capture|eager" | head -40
    step "head to head, ${2:-3} runs"
    timeout 330 python3 -m benchmarks --runs "${2:-3}" --time-limit 300 --out /tmp/h2h > "$out/h2h.log" 2>&1
    echo "rc=$?"; cp /tmp/h2h/summary.json /tmp/h2h/tables.md "$out/" 2>/dev/null; tail -50 "$out/h2h.log"
    step "soak"
    timeout 45 python3 tools/soak.py > "$out/soak.txt" 2>&1; tail -4 "$out/soak.txt"
    step "graph files start-up"
    timeout 40 python3 benchmarks/graph_files_startup.py > "$out/files.txt" 2>&1; tail -14 "$out/files.txt"
    ;;
split-ab)
    # The earlier package alone (./.before's pycudagraph, built there) first on PYTHONPATH,
    # then this tree's, each time through this tree's benchmarks.
    old=/tmp/ab_old; rm -rf $old; mkdir -p $old
    (cd .before && python3 pycudagraph/_cuda/_build.py > /dev/null) && cp -r .before/pycudagraph $old/
    python3 setup.py build_ext --inplace > /dev/null 2>&1
    for i in $(seq "${2:-4}"); do
        PYTHONPATH=$old:$PWD python3 benchmarks/profile_split.py "${3:-60}" "before $i" 2>&1 \
            | grep "^\[" | tee -a "$out/split_ab.txt"
        python3 benchmarks/profile_split.py "${3:-60}" "after $i" 2>&1 | grep "^\[" \
            | tee -a "$out/split_ab.txt"
    done
    ;;
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
h2h)
    step "build the compiled hot path in place"
    python3 setup.py build_ext --inplace > /dev/null 2>&1; echo "build rc=$?"
    python3 -m pycudagraph info 2>&1 | grep -i "hot path"
    step "hot-path tests (GPU end to end; CPU against the driver stub; the suite's plumbing)"
    timeout 150 python3 -m pytest -q -rs -p no:cacheprovider tests/runtime/test_native_end_to_end.py \
        tests/runtime/test_fast_all_args.py tests/runtime/test_fast_layer.py tests/benchmarks \
        > "$out/tests.log" 2>&1; summary "$out/tests.log"
    grep -E "^(FAILED|ERROR)" "$out/tests.log" | head -20
    step "benchmarks head to head, 3 runs"
    timeout 500 python3 -m benchmarks --runs 3 --time-limit 480 --out "$out" > "$out/h2h.log" 2>&1
    echo "rc=$?"; tail -60 "$out/h2h.log"
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
    bash "$0" multi-tests; bash "$0" multi-bench
    ;;
multi-tests)
    multi_setup
    only=${2:-}
    step "multi-GPU tests${only:+ (only the $only-GPU variants)}"
    log="$out/multi_tests${only:+_$only}.log"
    timeout 560 python3 -m pytest -q -rs -p no:cacheprovider tests/multi_gpu \
        tests/runtime/test_device.py ${only:+-k "${only}gpus"} > "$log" 2>&1
    summary "$log"; grep -E "^(FAILED|ERROR)" "$log" | head -20
    grep -E "^SKIPPED" "$log" | sort | uniq -c | head -20
    ;;
multi-bench)
    multi_setup
    n=$(python3 -c "import pycudagraph as p; print(p.device_count())")
    run_ex() {  # name, timeout, arguments...
        local name=$1 limit=$2; shift 2
        step "examples/$name.py $*"
        timeout "$limit" python3 "examples/$name.py" "$@" > "$out/$name${1:+_${1#--}}.txt" 2>&1
        echo "rc=$?"; tail -8 "$out/$name${1:+_${1#--}}.txt"
    }
    run_ex multi_gpu_launch 120
    run_ex multi_gpu_graph 120
    run_ex multi_gpu_nccl 200 --gpus "$n"
    run_ex multi_gpu_torch_tp 300 --procs "$n"
    for c in "order --mode serialize" "order --mode refuse" "if" "if --no-mixing" "while --no-mixing"; do
        step "examples/multi_gpu_nccl_order.py --case $c --procs $n"  # graphs sharing a communicator
        f="$out/nccl_order_${c// /_}.txt"
        timeout 150 python3 examples/multi_gpu_nccl_order.py --case $c --procs "$n" > "$f" 2>&1
        echo "rc=$?"; grep -E "^rank 0: |refused at capture|Error|^OK$" "$f" | cut -c1-300 | head -6
    done
    quick=${2:-}  # "quick": the table from 300 steps and two sizes
    step "scaling table: python -m benchmarks.tp_step ${quick:+--quick} (every GPU count up to $n)"
    timeout 480 python3 -m benchmarks.tp_step ${quick:+--quick} --json "$out/scaling.json" \
        > "$out/scaling.txt" 2>&1
    echo "rc=$?"; grep -E "^(== |   [A-Za-z]+Error|   NotSupported)" "$out/scaling.txt" | head -30
    sed -n '/^### /,$p' "$out/scaling.txt"
    ;;
*)
    sed -n '2,/^set -uo/p' "$0" | grep '^#'; exit 2 ;;
esac
