"""The idempotent install: each step compares what is there with what should
be, so a second run changes nothing."""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass, field
from typing import Callable

from .layout import (CACHE_DIR, CONFIG_PATH, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, HEAD_UNITS, HOOKS, LOGROTATE_PATH,
                     SYSTEMD_DIR, TIMER_WANTS_DIR, under, wrapper_path)
from .templates import head_unit_text, logrotate_text, wrapper_text


@dataclass
class Step:
    path: str                    # as the node sees it
    what: str                    # human description
    apply: Callable[[], None] = field(repr=False)


def _is_root() -> bool:
    return os.geteuid() == 0


def _chown_root(path: str) -> None:
    if _is_root():
        os.chown(path, 0, 0, follow_symlinks=False)


def _needs_fix(st: os.stat_result, mode: int) -> list[str]:
    wrong = []
    if stat.S_IMODE(st.st_mode) != mode:
        wrong.append(f"mode {stat.S_IMODE(st.st_mode):04o} -> {mode:04o}")
    if _is_root() and (st.st_uid, st.st_gid) != (0, 0):
        wrong.append(f"owner {st.st_uid}:{st.st_gid} -> root:root")
    return wrong


def _dir_steps(root: str, node_path: str, mode: int = 0o755) -> list[Step]:
    """Create node_path (and missing parents, 0755 root) or fix its owner/mode."""
    steps: list[Step] = []
    missing = []
    current = node_path
    while current not in ("/", "") and not os.path.lexists(under(root, current)):
        missing.append(current)
        current = os.path.dirname(current)
    for path in reversed(missing):
        m = mode if path == node_path else 0o755

        def make(p=under(root, path), m=m):
            os.mkdir(p, m)
            os.chmod(p, m)
            _chown_root(p)

        steps.append(Step(path, f"create directory {m:04o} root:root", make))
    real = under(root, node_path)
    if not missing:
        if os.path.islink(real):
            # A versioned prefix behind a symlink (/opt/slurmqual -> /opt/slurmqual-0.2.0): its target is the
            # dir; leave the link alone.
            if not os.path.isdir(real):
                raise InstallError(f"{node_path} is a symlink to no directory: fix or remove it and re-run")
            return steps
        st = os.lstat(real)
        if not stat.S_ISDIR(st.st_mode):
            raise InstallError(f"{node_path} exists and is not a directory: move it away and re-run")
        steps += _fix_steps(node_path, real, st, mode)
    return steps


def _fix_steps(node_path: str, real: str, st: os.stat_result, mode: int) -> list[Step]:
    """A step setting root:root and `mode` on an existing path, if either is wrong."""
    wrong = _needs_fix(st, mode)
    if not wrong:
        return []

    def fix(p=real, m=mode):
        os.chmod(p, m)
        _chown_root(p)

    return [Step(node_path, "fix " + ", ".join(wrong), fix)]


def _file_steps(root: str, node_path: str, content: str, mode: int, replace: bool) -> list[Step]:
    """Write node_path if absent (or if different and `replace`), else fix owner/mode."""
    real = under(root, node_path)
    parent = os.path.dirname(node_path)
    # Create missing parents; an existing parent (/etc/logrotate.d) is not ours to change.
    steps = _dir_steps(root, parent) if not os.path.lexists(under(root, parent)) else []

    def write(p=real, c=content, m=mode):
        tmp = f"{p}.slurmqual-install.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, m)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(c)
        os.chmod(tmp, m)
        _chown_root(tmp)
        os.replace(tmp, p)

    if not os.path.lexists(real):
        steps.append(Step(node_path, f"write file {mode:04o} root:root", write))
        return steps
    if os.path.islink(real) or not os.path.isfile(real):
        raise InstallError(f"{node_path} exists and is not a regular file: move it away and re-run")
    if replace:
        with open(real, encoding="utf-8", errors="replace") as fh:
            if fh.read() != content:
                steps.append(Step(node_path, f"rewrite file {mode:04o} root:root (content changed)", write))
                return steps
    return steps + _fix_steps(node_path, real, os.lstat(real), mode)


def _link_steps(root: str, node_path: str, target: str) -> list[Step]:
    """A symlink node_path -> target (what `systemctl enable` makes), created
    or pointed back at target."""
    real = under(root, node_path)
    steps = _dir_steps(root, os.path.dirname(node_path)) if not os.path.lexists(under(root, os.path.dirname(node_path))) \
        else []

    def link(p=real, t=target):
        tmp = f"{p}.slurmqual-install.{os.getpid()}"
        os.symlink(t, tmp)
        os.replace(tmp, p)

    if not os.path.lexists(real):
        return steps + [Step(node_path, f"link -> {target}", link)]
    if not os.path.islink(real):
        raise InstallError(f"{node_path} exists and is not a symlink: move it away and re-run")
    if os.readlink(real) != target:
        return steps + [Step(node_path, f"relink -> {target} (was {os.readlink(real)})", link)]
    return steps


def head_node_steps(root: str, python: str, config_path: str = CONFIG_PATH) -> list[Step]:
    """The head node's systemd units (requalify --swapped every 15 minutes),
    the timer enabled as `systemctl enable` would (a wants symlink: works in an
    image tree too)."""
    steps: list[Step] = []
    for name in HEAD_UNITS:
        steps += _file_steps(root, os.path.join(SYSTEMD_DIR, name), head_unit_text(name, python, config_path), 0o644,
                             replace=True)
    timer = next(n for n in HEAD_UNITS if n.endswith(".timer"))
    steps += _link_steps(root, os.path.join(TIMER_WANTS_DIR, timer), os.path.join(SYSTEMD_DIR, timer))
    return steps


class InstallError(Exception):
    pass


def _load_config(path: str, fallback_text: str | None):
    """Validated config from `path`, or from `fallback_text` (the example a dry
    run would write). Never uses or writes the config cache."""
    from ..config import Config, ConfigError, load, parse_toml, validate

    if os.path.exists(path):
        return load(path, use_cache=False)
    if fallback_text is None:
        raise ConfigError(f"{path}: config file not found")

    return Config(validate(parse_toml(fallback_text.encode(), "<annotated example>"), "<annotated example>"), path)


def plan(root: str, prefix: str, python: str, config_path: str = CONFIG_PATH, cache_dir: str = CACHE_DIR,
         head_node: bool = False) -> list[Step]:
    from ..data import text

    example = text("slurmqual.toml")
    steps: list[Step] = []
    steps += _file_steps(root, config_path, example, 0o644, replace=False)
    config = _load_config(under(root, config_path), example)
    hooks_cfg = config["hooks"]
    for d in (hooks_cfg["state_dir"], os.path.dirname(hooks_cfg["log_file"]), cache_dir):
        steps += _dir_steps(root, d)
    if hooks_cfg["metrics_dir"]:
        if os.path.isdir(under(root, hooks_cfg["metrics_dir"])):
            pass  # node_exporter's dir: its owner and mode are the exporter's business
        else:
            steps += _dir_steps(root, hooks_cfg["metrics_dir"])
    for hook in HOOKS:
        steps += _file_steps(root, wrapper_path(prefix, hook), wrapper_text(hook, python, config_path, cache_dir), 0o755, replace=True)
    if os.path.isdir(under(root, "/etc/logrotate.d")) or root not in ("", "/"):
        steps += _file_steps(root, LOGROTATE_PATH, logrotate_text(hooks_cfg["log_file"]), 0o644, replace=True)
    if head_node:
        steps += head_node_steps(root, python, config_path)
    return _dedupe(steps)


def _dedupe(steps: list[Step]) -> list[Step]:
    seen: set[tuple[str, str]] = set()
    out = []
    for s in steps:
        if (s.path, s.what) not in seen:
            seen.add((s.path, s.what))
            out.append(s)
    return out


def _untrusted_config(root: str, config_path: str, dry_run: bool, out) -> bool:
    """A config others could write may have been changed by them: fix its owner
    and mode, but do not act on its content (dirs to create) until an admin has
    read it. True: stop here."""
    real = under(root, config_path)
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode) or not (st.st_mode & 0o022 or (_is_root() and st.st_uid != 0)):
        return False
    wrong = ", ".join(_needs_fix(st, 0o644)) or "mode"
    if dry_run:
        print(f"would fix {wrong}: {config_path}, then stop: review its content before installing", file=out)
        return True
    os.chmod(real, 0o644)
    _chown_root(real)
    print(f"fix {wrong}: {config_path}", file=out)
    print(f"slurmqual install: {config_path} was writable by others, who may have changed it: review it, "
          "then re-run slurmqual install", file=sys.stderr)
    return True


def run_install(root: str, prefix: str, python: str, dry_run: bool, config_path: str = CONFIG_PATH,
                cache_dir: str = CACHE_DIR, out=sys.stdout, head_node: bool = False) -> int:
    from ..config import ConfigError

    if not dry_run and not _is_root() and root in ("", "/"):
        print("slurmqual install: must run as root (the hooks run as root and refuse files others own); "
              "use --dry-run to see the plan", file=sys.stderr)
        return EXIT_USAGE
    done = 0
    try:
        if _untrusted_config(root, config_path, dry_run, out):
            return EXIT_PROBLEMS
        # The config comes first: the dirs to create are named in it (a dry run,
        # or a run without one yet, plans against the example it writes).
        steps = plan(root, prefix, python, config_path, cache_dir, head_node)
        if dry_run:
            for s in steps:
                print(f"would {s.what}: {s.path}", file=out)
            print(f"{len(steps)} change(s) planned (dry run: nothing changed)" if steps
                  else "nothing to do, up to date (dry run)", file=out)
            return EXIT_OK
        for step in steps:
            step.apply()
            print(f"{step.what}: {step.path}", file=out)
            done += 1
        left = plan(root, prefix, python, config_path, cache_dir, head_node)
        if left:
            raise InstallError(f"install did not converge ({left[0].path}: {left[0].what}): please report this")
        if head_node and any(s.path.startswith(SYSTEMD_DIR + "/") for s in steps) and root in ("", "/"):
            print("slurmqual install: systemd units changed: run `systemctl daemon-reload && "
                  "systemctl restart slurmqual-requalify-swapped.timer`", file=out)
    except ConfigError as exc:
        print(f"slurmqual install: the site config is invalid, fix it and re-run:\n{exc}", file=sys.stderr)
        return EXIT_USAGE
    except (InstallError, OSError) as exc:
        print(f"slurmqual install: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    print(f"slurmqual install: {done} change(s); up to date" if done else "slurmqual install: nothing to do, up to date",
          file=out)
    return EXIT_OK
