#!/usr/bin/env bash
# Run the whole test suite on a fresh Debian 12 machine: installs the system
# packages the suite needs (real Slurm, munge, chromium, debootstrap) when run
# as root, creates .venv, installs slurmqual with its test extras, builds (or
# reuses) the cached Debian chroots of the Slurm version matrix, runs pytest.
# SLURMQUAL_SLURM_VERSIONS=22.05,24.11,newest (the default) picks the versions.
# The tests run side by side (pytest-xdist, SLURMQUAL_TEST_WORKERS workers,
# default 4; 0 runs them in this process): each module's cluster of each Slurm
# version is one group on one worker (tests/conftest.py), the unit tests fill
# the gaps. Passing -n yourself, or -p no:xdist, turns this off.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(python3-venv munge slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin chromium prometheus debootstrap)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    missing=()
    for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    if [ ${#missing[@]} -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'

# The newer Slurm versions come from Debian chroots (tests/chroot.py), cached
# under /var/cache/slurmqual-tests: built here once (a few minutes, both in
# parallel) so the build shows in the log; a version whose packages cannot be
# fetched is skipped by the tests with the reason.
if [ "$(id -u)" = 0 ] && [ "${SLURMQUAL_SLURM_VERSIONS:-24.11}" != 22.05 ]; then
    .venv/bin/python tests/chroot.py build --versions "${SLURMQUAL_SLURM_VERSIONS:-22.05,24.11,newest}" || true
fi

# Slurm releases built from ../shared/sources (tests/slurmbuild.py: 25.11, about
# 20 min on 2 cores the first time, then cached): the build starts here in the
# background, niced, while pytest runs the unit tests and the other versions;
# those versions' tests are queued last and wait for it (a lock, one build).
build_pid=
if [ "$(id -u)" = 0 ] && [ -f tests/slurmbuild.py ]; then
    built=$(.venv/bin/python - <<'PY'
import os, sys
sys.path.insert(0, "tests")
import slurmbuild
raw = os.environ.get("SLURMQUAL_SLURM_VERSIONS", "")
wanted = [v.strip() for v in raw.split(",") if v.strip()] or list(slurmbuild.RELEASES)
print(" ".join(v for v in wanted if v in slurmbuild.RELEASES and not slurmbuild.why_unavailable(v)))
PY
)
    if [ -n "$built" ]; then
        build_log=${TMPDIR:-/tmp}/slurmqual-slurmbuild.log
        echo "building Slurm $built from source in the background (log: $build_log)"
        # shellcheck disable=SC2086
        setsid nice -n 10 .venv/bin/python tests/slurmbuild.py build $built --pyslurm-into .venv/bin/python \
            >"$build_log" 2>&1 </dev/null &
        build_pid=$!
    fi
fi

workers=${SLURMQUAL_TEST_WORKERS:-4}
dist=(-n "$workers" --dist loadgroup --no-loadscope-reorder)
for a in "$@"; do
    case $a in -n|-n[0-9]*|--numprocesses*|--dist*|no:xdist|-pno:xdist) dist=() ;; esac
done
[ "$workers" = 0 ] && dist=()
rc=0
.venv/bin/python -m pytest -p no:cacheprovider "${dist[@]}" "$@" || rc=$?
if [ -n "$build_pid" ] && kill -0 "$build_pid" 2>/dev/null; then
    kill -- "-$build_pid" 2>/dev/null || true  # not needed after all (a -k run): the cache redoes it next time
fi
exit "$rc"
