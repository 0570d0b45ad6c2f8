"""Job records -> (key, state), per generation.

- v0.0.36-v0.0.38 (22.05): plain integers, ``job_state`` a word;
- v0.0.39 (23.02): numbers that may be unset are wrapped
  ({"set", "infinite", "number"}), ``job_state`` still a word;
- v0.0.40+ (23.11+): ``job_state`` a list, base state first, then flags.

An array task is keyed "ARRAYJOB_TASK" (as `squeue` prints it), other jobs by
their id.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import FormatError
from .numbers import unwrap
from .version import SlurmVersion, check_known, generation_of

JOB_BASE_STATES = {"PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL",
                   "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"}
JOB_FLAGS = {"END", "LAUNCH_FAILED", "REQUEUED", "REQUEUE_HOLD", "SPECIAL_EXIT", "RESIZING", "CONFIGURING",
             "COMPLETING", "STOPPED", "RECONFIG_FAIL", "POWER_UP_NODE", "REVOKED", "REQUEUE_FED", "RESV_DEL_HOLD",
             "SIGNALING", "STAGE_OUT", "EXPEDITING", "UPDATE_DB"}

# A job in one of these (base state, or a flag: 22.05-23.02 may print a flag
# alone) still holds or waits for nodes and may still write its results.
ACTIVE_STATES = {"PENDING", "RUNNING", "SUSPENDED"}
ACTIVE_FLAGS = {"COMPLETING", "CONFIGURING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SIGNALING",
                "STAGE_OUT", "STOPPED", "POWER_UP_NODE", "RESV_DEL_HOLD"}


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    key: str                 # "J" or "A_T" for an array task
    array_job_id: str | None
    name: str
    state: str               # base state: RUNNING, COMPLETED, ...
    flags: tuple[str, ...] = ()
    comment: str = ""

    @property
    def active(self) -> bool:
        """Still pending, running, suspended, requeued or completing: not finished.
        The one answer to "is this job still going?" (requalify, burnin watch, ...)."""
        return self.state in ACTIVE_STATES or self.state in ACTIVE_FLAGS or bool(ACTIVE_FLAGS & set(self.flags))


def _state(value, gen: int) -> tuple[str, tuple[str, ...]]:
    if gen >= 40:
        if not isinstance(value, list) or not value:
            raise ValueError(f"'job_state' is {value!r}, this format has a non-empty list")
        words = [str(v).upper() for v in value]
    else:
        if not isinstance(value, str):
            raise ValueError(f"'job_state' is {type(value).__name__}, this format has a word")
        words = [value.upper()]
    base = [w for w in words if w in JOB_BASE_STATES]
    unknown = [w for w in words if w not in JOB_BASE_STATES and w not in JOB_FLAGS]
    if len(base) > 1 or unknown or not words:
        raise ValueError(f"'job_state' {value!r} has no single known base state")
    if not base:   # 22.05-23.02 write a flag alone for some phases ("COMPLETING"), as squeue's CG
        return words[0], tuple(words[1:])
    return base[0], tuple(w for w in words if w != base[0])


def decode_jobs(doc, source: str, version: SlurmVersion | None = None) -> list[JobRecord]:
    """JobRecords from {"jobs": [...]} of `squeue --json` or slurmrestd."""
    who, gen = generation_of(doc, source, version)
    raw = doc.get("jobs")
    if not isinstance(raw, list):
        raise check_known(who, gen, source, "no 'jobs' list")
    out = []
    for i, rec in enumerate(raw):
        try:
            if gen <= 38:
                for f in ("job_id", "array_job_id", "array_task_id"):
                    if isinstance(rec.get(f), dict):
                        raise ValueError(f"'{f}' is wrapped; this format has plain numbers")
            job_id = unwrap(rec["job_id"], field="job_id")
            if job_id is None:
                raise ValueError("no job_id")
            arr = unwrap(rec.get("array_job_id"), field="array_job_id")
            task = unwrap(rec.get("array_task_id"), field="array_task_id")
            state, flags = _state(rec["job_state"], gen)
            name = rec.get("name") or ""
            comment = rec.get("comment") or ""
            if isinstance(comment, dict):   # slurmrestd 23.11+: {"administrator", "job", "system"}
                comment = comment.get("job") or ""
        except (KeyError, TypeError, ValueError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise check_known(who, gen, source, f"job record {i}: {detail}") from None
        pending = rec.get("array_task_string") or ""
        if arr and task is None and pending:
            # 26.05 keeps not-yet-split pending tasks in the array's own record
            # ("array_task_string": "2-5,7"): one record per task, as squeue -r shows.
            try:
                tasks = array_tasks(str(pending))
            except ValueError as exc:
                raise check_known(who, gen, source, f"job record {i}: {exc}") from None
        else:
            tasks = [task] if arr and task is not None else [None]
        for t in tasks:
            key = f"{arr}_{t}" if t is not None else str(job_id)
            out.append(JobRecord(str(job_id), key, str(arr) if arr else None, str(name), state, flags, str(comment)))
    return out


def array_tasks(spec: str, limit: int = 1_000_000) -> list[int]:
    """"2-5,7", "0-15:4%2" -> task ids (step after ':', throttle after '%' ignored)."""
    out: list[int] = []
    for part in spec.split("%", 1)[0].split(","):
        part = part.strip()
        if not part:
            continue
        rng, _, step = part.partition(":")
        lo, dash, hi = rng.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()) or (step and not step.isdigit()):
            raise ValueError(f"array_task_string {spec!r} is not a task list")
        first, last, inc = int(lo), int(hi or lo), int(step or 1)
        if last < first or inc < 1 or len(out) + (last - first) // inc >= limit:
            raise ValueError(f"array_task_string {spec!r} is not a task list")
        out.extend(range(first, last + 1, inc))
    return out


__all__ = ["FormatError", "JobRecord", "decode_jobs"]
