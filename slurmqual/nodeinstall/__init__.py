"""`slurmqual install`: put the venv-independent pieces of a node install in
place, and `slurmqual install --check`: verify an install the way slurmd uses it.

What `install` manages (all owned by root, nothing group/world-writable, because
the hooks run as root and refuse files others could change, see security.py):

- hook wrappers PREFIX/libexec/{prolog,epilog,healthcheck}/slurmqual-HOOK, the
  paths config/slurm.conf.snippet names; each execs this venv's python in
  isolated mode, so they need no PATH and ignore PYTHON* variables;
- /etc/slurmqual/config.toml from the annotated example, only if absent (0644);
- the state, log and cache dirs the config names (0755), and the metrics dir;
- /etc/logrotate.d/slurmqual for the hooks' log file.

Idempotent: each step compares what is there with what should be, and a second
run changes nothing. `--root DIR` installs into a tree (image building, tests);
paths written into files are always the paths as the node will see them.

Modules: layout (paths as the node sees them), templates (the files install
writes and the slurm.conf snippet), steps (the idempotent install), check
(`install --check`); slurm.conf itself is read by slurmqual/slurmconf.py;
`slurmqual install` (commands/install.py) parses the arguments.
"""
