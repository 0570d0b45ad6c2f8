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

workers=${SLURMQUAL_TEST_WORKERS:-4}
dist=(-n "$workers" --dist loadgroup --no-loadscope-reorder)
for a in "$@"; do
    case $a in -n|-n[0-9]*|--numprocesses*|--dist*|no:xdist|-pno:xdist) dist=() ;; esac
done
[ "$workers" = 0 ] && dist=()
exec .venv/bin/python -m pytest -p no:cacheprovider "${dist[@]}" "$@"
