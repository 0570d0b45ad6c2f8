import sys

# The hooks run before every job: go straight to them, without argparse and
# the CLI's command table (`slurmqual hook prolog` through cli.py is the same).
if len(sys.argv) == 3 and sys.argv[1] == "hook" and sys.argv[2] in ("prolog", "epilog", "healthcheck"):
    from .hooks import run

    sys.exit(run(sys.argv[2]))

from .cli import main

sys.exit(main())
