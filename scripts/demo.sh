#!/usr/bin/env bash
# Set up slurmqual on a fresh Debian 12 machine and run it on bundled example
# nodes: a healthy 8x H100 RoCE node, then nodes with GPUDirect RDMA off and
# DCQCN off. Idempotent. With --cluster (as root) it also brings up a local
# Slurm cluster whose HealthCheckProgram drains a broken node (scripts/localcluster.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    else
        echo "python3-venv is missing: sudo apt-get install python3-venv" >&2; exit 2
    fi
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e .
SQ=.venv/bin/slurmqual

work=$(mktemp -d /tmp/slurmqual-demo.XXXXXX)
export SLURMQUAL_CACHE_DIR="$work/cache"
# The example config as shipped, but its state dir (the checks' counter
# history) under $work: a demo never writes where a real install keeps its data.
CONF="$work/slurmqual.toml"
sed "s|^state_dir = \"/var/lib/slurmqual/state\"|state_dir = \"$work/state\"|" config/slurmqual.toml > "$CONF"
grep -q "^state_dir = \"$work/state\"" "$CONF" || { echo "config/slurmqual.toml: no state_dir line to point at $work" >&2; exit 1; }
for example in h100-roce-healthy no-peermem dcqcn-off; do
    "$SQ" examples create "$example" "$work/$example" >/dev/null
    echo
    echo "=== slurmqual check --root $work/$example   ($example)"
    "$SQ" check --root "$work/$example" --config "$CONF" --node "$example" || true
done
echo
echo "=== the same failing node as JSON (what the hooks record)"
"$SQ" check --root "$work/no-peermem" --config "$CONF" --node no-peermem --json || true
echo
echo "Example trees are in $work; 'slurmqual examples list' shows all of them."
echo
echo "=== what 'slurmqual install' sets up on a compute node (dry run into $work/node-root)"
mkdir -p "$work/node-root"
"$SQ" install --root "$work/node-root" --dry-run

if [ "${1:-}" = "--cluster" ] && [ -x scripts/localcluster.sh ]; then
    exec scripts/localcluster.sh demo
fi
