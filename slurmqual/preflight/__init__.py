"""`slurmqual preflight`: inside a user's job, prove the allocation's nodes
and links before the workload starts (checks on every node, a short pair
test across the allocation judged like the burn-in), pick the best N and
write them where a launcher reads them.

`judge` (what the measurements say about each node), `choose` (which N,
and the files a launcher reads) are the engine; `flow` runs it in the job.
"""
