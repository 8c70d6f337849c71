#!/usr/bin/env bash
# pycudagraph's tests on the CUDA 12.9 stack (cuda-bindings 12.9 + NVRTC 12) on a GPU
# machine that has the 13.x stack installed and no network.
#
#   bash tools/gpu_cu12.sh --prepare [DIR]     # with network: fill DIR (default ./.whl)
#   bash tools/gpu_cu12.sh [pytest args]       # on the GPU machine, e.g. -m gpu -q
#   bash tools/gpu_cu12.sh --system [pytest args]   # same report and run, image's stack
#
# Run it from the source tree to test (put first on PYTHONPATH). The wheel folder is
# $PCG_WHL, else the first of ./.whl and ../../.whl that exists. It holds cuda-bindings
# 12.9 (cp312, manylinux x86_64), cuda-pathfinder, and NVRTC 12.9's two libraries xz-compressed
# with its dist-info under nvrtc12/ (the 89 MB wheel becomes ~30 MB).
# A venv at $PCG_CU12_VENV (default /tmp/pcg-cu12) gets those; its site-packages come
# first on sys.path, then python3's own (a .pth file adds them), so the 12.x packages
# shadow the image's 13.x ones while pytest, numpy, CuPy and PyTorch stay importable.
# Before pytest runs, the script prints which cuda-bindings and which libnvrtc were really
# loaded, and stops unless both are 12.x.
set -euo pipefail

python=${PYTHON:-python3}
mode=cu12
case "${1:-}" in
    --prepare) mode=prepare; shift ;;
    --system) mode=system; shift ;;
esac

if [[ $mode == prepare ]]; then
    dir=${1:-./.whl}
    mkdir -p "$dir/nvrtc12" && cd "$dir"
    common=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
            --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
            --platform manylinux2014_x86_64 -d .)
    "$python" -m pip download "${common[@]}" "cuda-bindings==12.9.*" cuda-pathfinder
    tmp=$(mktemp -d)
    "$python" -m pip download "${common[@]}" -d "$tmp" "nvidia-cuda-nvrtc-cu12==12.9.*"
    (cd nvrtc12 && unzip -q -o "$tmp"/nvidia_cuda_nvrtc_cu12-*.whl 'nvidia/cuda_nvrtc/lib/libnvrtc.so.12' \
        'nvidia/cuda_nvrtc/lib/libnvrtc-builtins.so.12.*' 'nvidia_cuda_nvrtc_cu12-*.dist-info/*' \
        && xz -9 -T0 -f nvidia/cuda_nvrtc/lib/libnvrtc*.so.*)
    rm -rf "$tmp"
    du -sh .
    exit 0
fi

if [[ $mode == cu12 ]]; then
    whl=${PCG_WHL:-}
    for cand in ./.whl ../../.whl; do
        if [[ -z "$whl" && -d "$cand" ]]; then whl=$(cd "$cand" && pwd); fi
    done
    [[ -n "$whl" && -d "$whl" ]] || { echo "gpu_cu12.sh: no wheel folder (set PCG_WHL)" >&2; exit 2; }
    venv=${PCG_CU12_VENV:-/tmp/pcg-cu12}
    [[ -x "$venv/bin/python" ]] || "$python" -m venv --without-pip --system-site-packages "$venv"
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    pyver=$("$venv/bin/python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
    bindings=$(ls "$whl"/cuda_bindings-12.9.*-cp${pyver}-*.whl | head -n1)
    pathfinder=$(ls "$whl"/cuda_pathfinder-*.whl 2>/dev/null | head -n1 || true)
    # the image's pip installs into the venv's site-packages (the venv has no pip)
    PIP_BREAK_SYSTEM_PACKAGES=1 "$python" -m pip install --quiet --no-index --no-deps --upgrade --target "$site" \
        "$bindings" ${pathfinder:+"$pathfinder"}
    lib="$site/nvidia/cuda_nvrtc/lib"
    mkdir -p "$lib"
    for xzfile in "$whl"/nvrtc12/nvidia/cuda_nvrtc/lib/*.xz; do
        target="$lib/$(basename "$xzfile" .xz)"
        [[ -s "$target" ]] || xz -dc "$xzfile" > "$target"
    done
    cp -r "$whl"/nvrtc12/nvidia_cuda_nvrtc_cu12-*.dist-info "$site"/
    # When python3 is itself a venv (as on the GPU image), --system-site-packages reaches
    # only the base interpreter's packages: add python3's own site folders after ours.
    "$python" -c 'import site
print("".join(f"import site; site.addsitedir({d!r})\n" for d in site.getsitepackages()))' \
        > "$site/zz_pcg_outer_site.pth"
    python="$venv/bin/python"
    export PCG_EXPECT_MAJOR=12
fi

export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$python" - <<'EOF'
import os, sys
import cuda.bindings
from cuda.bindings import nvrtc
err, major, minor = nvrtc.nvrtcVersion()
libs = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libnvrtc.so" in line})
print(f"cuda-bindings {cuda.bindings.__version__} from {os.path.dirname(cuda.bindings.__file__)}")
print(f"NVRTC {major}.{minor} ({err.name}) loaded from {', '.join(libs) or '?'}")
try:
    import cuda.pathfinder
    print(f"cuda-pathfinder {cuda.pathfinder.__version__}")
except ImportError:
    pass
want = os.environ.get("PCG_EXPECT_MAJOR")
if want and (not cuda.bindings.__version__.startswith(want + ".") or major != int(want)):
    sys.exit(f"gpu_cu12.sh: expected cuda-bindings {want}.x and NVRTC {want}.x; stopping")
EOF
exec "$python" -m pytest "$@"
