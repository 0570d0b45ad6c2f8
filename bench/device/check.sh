#!/usr/bin/env bash
# Device check: slurmqual on a live machine with NVIDIA GPUs and a driver, no
# Slurm, no InfiniBand needed. Within ~8 minutes it
#   1. builds the wheel and installs it in a fresh venv (no checkout on the path),
#   2. runs `slurmqual config init` on the node and validates what it wrote,
#   3. runs every check at each level (fast, standard, slow) with that config:
#      verdict, reason and time of each; a check that cannot apply says n/a,
#   4. times the prolog, epilog and health check as slurmd runs them (the wrapper
#      `slurmqual install` writes, slurmd's environment) beside the venv's bare
#      `python3 -c pass`,
#   5. where source trees of gpu-burn, nccl-tests and nvbandwidth are given,
#      builds them with this machine's CUDA (nothing is downloaded) and runs each
#      briefly on every GPU through the burn-in task's own runner for this node
#      and `slurmqual burnin parse`,
#   6. runs `slurmqual preflight --need 1` as a one-node job would (job variables,
#      srun: bin/srun, --gpu-tools with the tools built in 5): output, exit code,
#      time and the files it writes (hostfile, node list, report),
# and writes everything to one report file. Exit 0: every check passed or was
# n/a, every hook exited 0 and the preflight chose the node; 1: something did
# not pass (see the report).
#
# Usage (docs/REAL_HARDWARE.md):
#   bench/device/check.sh [--out FILE] [--work DIR] [--python PY] [--wheel WHL] [--wheelhouse DIR]
#       [--gpu-burn SRC] [--nccl-tests SRC] [--nvbandwidth SRC] [--nccl-home DIR] [--cuda-home DIR]
#       [--boost PREFIX]   (a Boost with program_options for nvbandwidth, where the machine has none)
#       [--tool-seconds N] [--runs N] [--budget SECONDS]
#   Offline test mode (tests/test_device_check.py): --root TREE --tools DIR reads a
#   recorded node tree instead of / and runs the tools already in DIR (stand-ins).
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$REPO/bench/device"
OUT="$PWD/device-report.txt"; WORK=""; PY=""; WHEEL=""; WHEELHOUSE=""; ROOT="/"; TOOLS=""
GPU_BURN=""; NCCL_TESTS=""; NVBANDWIDTH=""; NCCL_HOME="${NCCL_HOME:-}"; CUDA_HOME="${CUDA_HOME:-}"; BOOST=""
TOOL_SECONDS=20; RUNS=20; BUDGET=480
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT=$2; shift ;;
        --work) WORK=$2; shift ;;
        --python) PY=$2; shift ;;
        --wheel) WHEEL=$2; shift ;;
        --wheelhouse) WHEELHOUSE=$2; shift ;;
        --root) ROOT=$2; shift ;;
        --tools) TOOLS=$2; shift ;;
        --gpu-burn) GPU_BURN=$2; shift ;;
        --nccl-tests) NCCL_TESTS=$2; shift ;;
        --nvbandwidth) NVBANDWIDTH=$2; shift ;;
        --nccl-home) NCCL_HOME=$2; shift ;;
        --cuda-home) CUDA_HOME=$2; shift ;;
        --boost) BOOST=$2; shift ;;
        --tool-seconds) TOOL_SECONDS=$2; shift ;;
        --runs) RUNS=$2; shift ;;
        --budget) BUDGET=$2; shift ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "check.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
    esac
    shift
done
START=$(date +%s)
[ -n "$WORK" ] || WORK=$(mktemp -d /tmp/slurmqual-device.XXXXXX)
mkdir -p "$WORK" && chmod 755 "$WORK"
WORK=$(cd "$WORK" && pwd)
: > "$OUT"
FAILED=0

elapsed() { echo $(( $(date +%s) - START )); }
left() { echo $(( BUDGET - $(elapsed) )); }
say() { printf '%s\n' "$*" | tee -a "$OUT"; }
section() { say ""; say "== $* [t=$(elapsed)s]"; }
# run a command, its output into the report (indented), its exit code kept in RC
run() {
    say "\$ $*"; "$@" > "$WORK/.out" 2>&1; RC=$?
    grep -v "^WARNING: Location '.*' is ignored" "$WORK/.out" | sed 's/^/  /' | tee -a "$OUT" >/dev/null
    return $RC
}

section "device check $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
say "repository: $REPO ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout'))"
say "mode: $([ "$ROOT" = / ] && echo 'live node (/)' || echo "node tree $ROOT (recorded outputs stand in for the tools)")"
say "kernel: $(uname -r)"
if [ "$ROOT" = / ]; then
    run nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,persistence_mode,mig.mode.current --format=csv \
        || say "  nvidia-smi failed (exit $RC): no driver?"
    run sh -c 'nvcc --version 2>/dev/null | tail -2 || ls -d /usr/local/cuda* 2>/dev/null'
fi

# -- 1. the wheel in a fresh venv ------------------------------------------------
section "1. wheel, fresh venv"
if [ -z "$PY" ]; then
    for c in python3.13 python3.12 python3.11 python3; do
        if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then PY=$c; break; fi
    done
fi
if [ -z "$PY" ]; then
    say "no python >= 3.11 found (slurmqual needs it): give --python"; exit 1
fi
PIPX=(--disable-pip-version-check -q)
[ -n "$WHEELHOUSE" ] && PIPX+=(--no-index --find-links "$WHEELHOUSE")
VENV="$WORK/venv"
rm -rf "$VENV"
run "$PY" -m venv "$VENV" || { say "python -m venv failed (install python3-venv)"; exit 1; }
if [ -z "$WHEEL" ]; then
    # Built from a copy: setuptools writes build/ and *.egg-info into the tree
    # it builds, so two builds of one checkout at once (or a build beside the
    # test suite's own) trip over each other, and the checkout stays clean.
    rm -rf "$WORK/src" && mkdir -p "$WORK/src"
    tar -C "$REPO" --exclude=./.git --exclude=./.venv --exclude=./build --exclude='./*.egg-info' -cf - . \
        | tar -C "$WORK/src" -xf - || { say "copying $REPO to build the wheel failed"; exit 1; }
    run "$VENV/bin/pip" wheel "${PIPX[@]}" --no-deps -w "$WORK/dist" "$WORK/src" \
        || { say "building the wheel failed (offline? give --wheel or --wheelhouse with setuptools)"; exit 1; }
    WHEEL=$(ls "$WORK"/dist/slurmqual-*.whl | head -1)
fi
run "$VENV/bin/pip" install "${PIPX[@]}" "$WHEEL" \
    || { say "installing $WHEEL failed (offline? --wheelhouse DIR with its dependencies)"; exit 1; }
SQ="$VENV/bin/slurmqual"; VPY="$VENV/bin/python"
say "installed: $("$SQ" --version) from $(basename "$WHEEL") with $("$VPY" --version)"
cd "$WORK" || exit 1   # nothing of the checkout is importable from here

# -- 2. config init ------------------------------------------------------------------
section "2. slurmqual config init"
run "$SQ" config init --root "$ROOT" -o "$WORK/init.toml"
say "  (config init exit $RC: 0 the node passes the config it wrote, 1 it does not)"
[ $RC -le 1 ] || { say "config init failed"; exit 1; }
[ $RC -eq 0 ] || FAILED=1
say "--- $WORK/init.toml"
sed 's/^/  /' "$WORK/init.toml" | tee -a "$OUT" >/dev/null
run "$SQ" config validate "$WORK/init.toml" || FAILED=1
"$VPY" "$HERE/devicecheck.py" runconfig "$WORK/init.toml" "$WORK/run.toml" --work "$WORK" --root "$ROOT"
export SLURMQUAL_CACHE_DIR="$WORK/cache"

# -- 3. the checks at each level ---------------------------------------------------------
for level in fast standard slow; do
    section "3. checks, level $level (config init's config)"
    run "$VPY" "$HERE/devicecheck.py" checks --config "$WORK/run.toml" --level "$level" --work "$WORK" || FAILED=1
    T0=$(date +%s%N)
    run "$SQ" check --config "$WORK/run.toml" --level "$level"
    say "  slurmqual check --level $level: exit $RC in $(( ($(date +%s%N) - T0) / 1000000 )) ms"
    [ $RC -eq 0 ] || FAILED=1
done

# -- 4. the hooks as slurmd runs them ----------------------------------------------------
section "4. hooks through the installed wrapper, slurmd's environment, vs bare python3 -c pass"
run "$VPY" "$HERE/devicecheck.py" hooks --config "$WORK/run.toml" --work "$WORK" --runs "$RUNS" || FAILED=1

# -- 5. burn-in tools ------------------------------------------------------------------------
section "5. burn-in tools: build, run on every GPU through the task's runner, burnin parse"
NCCL_DIR=""
if [ -z "$TOOLS" ]; then
    TOOLS="$WORK/tools"; mkdir -p "$TOOLS"
    [ -n "$CUDA_HOME" ] || for c in /usr/local/cuda /usr/lib/cuda /usr; do [ -x "$c/bin/nvcc" ] && { CUDA_HOME=$c; break; }; done
    say "CUDA: ${CUDA_HOME:-not found (no nvcc)}"
    build() {  # name, seconds, command...: a build gets what is left of the budget, at most its share
        local name=$1 secs=$2; shift 2
        local cap=$(( $(left) - 150 )); [ "$secs" -lt "$cap" ] || secs=$cap
        if [ "$secs" -lt 20 ]; then say "$name: not built: no time left in the ${BUDGET}s budget"; return 1; fi
        run timeout "$secs" "$@" || { say "$name: build failed or timed out after ${secs}s (exit $RC)"; return 1; }
    }
    if [ -n "$GPU_BURN" ]; then
        rm -rf "$WORK/src-gpu-burn"; cp -r "$GPU_BURN" "$WORK/src-gpu-burn"
        # gpu-burn before 2024 compiles its kernel to compare.ptx, later ones to
        # compare.fatbin; gpu_burn reads it from its working directory (the tools dir).
        build gpu-burn 120 make -C "$WORK/src-gpu-burn" ${CUDA_HOME:+CUDAPATH=$CUDA_HOME} \
            && cp "$WORK/src-gpu-burn/gpu_burn" $(ls "$WORK"/src-gpu-burn/compare.ptx "$WORK"/src-gpu-burn/compare.fatbin 2>/dev/null) "$TOOLS/"
    else say "gpu-burn: no source tree given (--gpu-burn SRC): untested"; fi
    if [ -n "$NVBANDWIDTH" ]; then
        rm -rf "$WORK/src-nvbandwidth"; cp -r "$NVBANDWIDTH" "$WORK/src-nvbandwidth"
        # --boost PREFIX: its BoostConfig.cmake exactly (the machine's own Boost
        # CMake files, without program_options, must not be picked instead)
        BOOST_DIR=""
        [ -z "$BOOST" ] || BOOST_DIR=$(ls -d "$BOOST"/lib/*/cmake/Boost-* "$BOOST"/lib/cmake/Boost-* 2>/dev/null | head -1)
        [ -z "$BOOST" ] || say "nvbandwidth: Boost from ${BOOST_DIR:-$BOOST (no lib/*/cmake/Boost-*: not usable)}"
        build nvbandwidth 180 sh -c "cd '$WORK/src-nvbandwidth' && cmake ${CUDA_HOME:+-DCMAKE_CUDA_COMPILER=$CUDA_HOME/bin/nvcc} ${BOOST_DIR:+-DBoost_DIR=$BOOST_DIR} . >/dev/null && make -j\$(nproc)" \
            && cp "$WORK/src-nvbandwidth/nvbandwidth" "$TOOLS/"
    else say "nvbandwidth: no source tree given (--nvbandwidth SRC): untested"; fi
    if [ -n "$NCCL_TESTS" ]; then
        rm -rf "$WORK/src-nccl-tests"; cp -r "$NCCL_TESTS" "$WORK/src-nccl-tests"
        # for this machine's GPUs only: nccl-tests' default list of architectures
        # takes several times as long to build
        CC_=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
        build nccl-tests 150 make -C "$WORK/src-nccl-tests" -j"$(nproc)" MPI=0 ${CUDA_HOME:+CUDA_HOME=$CUDA_HOME} \
            ${NCCL_HOME:+NCCL_HOME=$NCCL_HOME} ${CC_:+NVCC_GENCODE=-gencode=arch=compute_$CC_,code=sm_$CC_} \
            && NCCL_DIR="$WORK/src-nccl-tests/build"
    else say "nccl-tests: no source tree given (--nccl-tests SRC): untested"; fi
    for t in dcgmproftester13 dcgmproftester12 dcgmproftester11; do
        p=$(command -v $t) && { ln -sf "$p" "$TOOLS/$t"; say "dcgmproftester: installed one used ($p)"; break; }
    done
fi
if [ "$(left)" -lt $(( TOOL_SECONDS * 2 + 90 )) ]; then
    say "tools: not run: $(left)s left of the ${BUDGET}s budget"
else
    PATH="$HERE/bin:$PATH" run "$VPY" "$HERE/devicecheck.py" tools --config "$WORK/run.toml" --work "$WORK" \
        --tools-dir "$TOOLS" ${NCCL_DIR:+--nccl-tests-dir "$NCCL_DIR"} --seconds "$TOOL_SECONDS" || FAILED=1
fi

# -- 6. the preflight a user's job runs ------------------------------------------------------
section "6. slurmqual preflight --need 1 as a one-node job runs it (srun: bench/device/bin/srun)"
PF_TIME=90; [ "$(left)" -ge $(( PF_TIME + 40 )) ] || PF_TIME=$(( $(left) - 40 ))
if [ "$PF_TIME" -lt 20 ]; then
    say "preflight: not run: $(left)s left of the ${BUDGET}s budget"; FAILED=1
else
    PATH="$HERE/bin:$PATH" run "$VPY" "$HERE/devicecheck.py" preflight --config "$WORK/run.toml" --work "$WORK" \
        --tools-dir "$TOOLS" ${NCCL_DIR:+--nccl-tests-dir "$NCCL_DIR"} --time "$PF_TIME" || FAILED=1
fi

section "done"
say "total $(elapsed) s (budget ${BUDGET} s: $([ "$(elapsed)" -le "$BUDGET" ] && echo within || echo OVER)); \
$([ $FAILED -eq 0 ] && echo 'every check passed or was n/a, every hook exited 0' || echo 'SOMETHING DID NOT PASS: see above')"
say "report: $OUT; work dir: $WORK"
exit $FAILED
