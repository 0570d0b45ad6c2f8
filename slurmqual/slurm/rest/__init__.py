"""Slurm adapter over slurmrestd, for admin hosts without the Slurm CLI.

Modules: transport (HTTP, the JWT and where it may go), capabilities (what the
server offers, from its OpenAPI document), jobs (job submission bodies per
generation), adapter (RestAdapter: the SlurmAdapter operations).

What the server can do is read from its own OpenAPI document, per
generation: the newest v0.0.N it offers that slurmqual knows; node updates
(drain/resume) where it has POST /node/{node_name} (v0.0.39+, 23.02+);
reservations where it has POST /reservation (25.05+); job submission with
required/excluded node lists from v0.0.39. Only what the server truly lacks
answers "needs scontrol on this host".

Auth: a JWT (token file or $SLURMRESTD_TOKEN) in per-request headers, or
none over a unix socket served with rest_auth/local. The token is sent only
to the configured host: redirects are never followed, plain http:// to a
host other than loopback or through a proxy is refused unless the site
config allows it, a token file others can read is refused, and
$SLURMRESTD_TOKEN is taken out of the environment as the process starts
(slurmqual/__init__.py) so no child process inherits it.

Reads and idempotent changes retry (tenacity); a job submission is never
blindly repeated: it carries a unique comment mark that is looked for
before any second try.
"""
