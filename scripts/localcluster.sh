#!/usr/bin/env bash
# A local Slurm cluster (Debian's munge/slurmctld/slurmd, one slurmd per
# simulated node on loopback) whose hooks are slurmqual's, each node with its
# own example node tree as root. Root only.
#
#   scripts/localcluster.sh up [DIR] [NODES]   start (default /tmp/slurmqual-cluster, 4 nodes)
#   scripts/localcluster.sh down [DIR]         stop by pid
#   scripts/localcluster.sh demo [DIR]         start, break n2, watch slurmd drain it, repair, stop
#
# SLURM_VERSION=24.11 or =newest runs that Slurm from a cached Debian chroot
# (tests/chroot.py builds it on first use); the default is the host's 22.05.
set -euo pipefail
cd "$(dirname "$0")/.."
action=${1:-up}
dir=${2:-/tmp/slurmqual-cluster}
version=${SLURM_VERSION:-22.05}
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3

if [ "$(id -u)" != 0 ]; then echo "localcluster.sh: needs root (slurmd, munged)" >&2; exit 2; fi
for p in munge slurmctld slurmd slurm-client; do
    dpkg -s "$p" >/dev/null 2>&1 || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq munge slurmctld slurmd slurm-client >/dev/null; break; }
done

case "$action" in
up)
    "$PY" tests/slurmcluster.py up "$dir" --nodes "${3:-4}" --version "$version"
    ;;
down)
    "$PY" tests/slurmcluster.py down "$dir"
    ;;
demo)
    eval "$("$PY" tests/slurmcluster.py up "$dir" --nodes 4 --version "$version")"
    trap '"$PY" tests/slurmcluster.py down "$dir" >/dev/null' EXIT
    echo "cluster up: SLURM_CONF=$SLURM_CONF"; sinfo
    echo; echo "--- unloading nvidia_peermem on n2 (its node tree: $dir/trees/n2)"
    "$PY" -c "from slurmqual.nodetree import remove_module; remove_module('$dir/trees/n2', 'nvidia_peermem')"
    for _ in $(seq 30); do sinfo -R -h | grep -q n2 && break; sleep 1; done
    echo "--- HealthCheckProgram ran on n2 and drained it:"; sinfo -R
    echo; echo "--- repairing n2"
    "$PY" -c "from slurmqual.nodetree import add_module; add_module('$dir/trees/n2', 'nvidia_peermem')"
    for _ in $(seq 30); do sinfo -R -h | grep -q n2 || break; sleep 1; done
    sinfo
    echo; echo "--- slurmqual log:"; tail -n 5 "$dir/log/slurmqual.log"
    ;;
*)
    echo "usage: $0 up|down|demo [DIR] [NODES]" >&2; exit 2
    ;;
esac
