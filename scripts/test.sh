#!/usr/bin/env bash
# Run the whole test suite on a fresh Debian 12 machine: installs the system
# packages the suite needs (real Slurm, munge, chromium) when run as root,
# creates .venv, installs slurmqual with its test extras, runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(python3-venv munge slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin chromium)
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
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
