"""The suite's own hygiene check: files a run leaves in a real install's
directories are found, older ones are not."""

import os
import time

from leakcheck import install_dirs, written_since


def test_finds_what_a_run_wrote_and_only_that(tmp_path):
    cache = tmp_path / "chroots"
    old = cache / "trixie" / "var" / "lib" / "slurmqual" / "state" / "config-problems" / "n1.json"
    old.parent.mkdir(parents=True)
    old.write_text("{}")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    start = time.time() - 1
    new = cache / "trixie" / "var" / "log" / "slurmqual" / "slurmqual.log"
    new.parent.mkdir(parents=True)
    new.write_text("line\n")
    dirs = install_dirs(str(cache))
    assert str(cache / "trixie" / "var" / "lib" / "slurmqual") in dirs and "/var/lib/slurmqual" in dirs
    assert written_since(start, [d for d in dirs if d.startswith(str(tmp_path))]) == [str(new)]


def test_no_chroot_cache_means_the_machine_alone(tmp_path):
    assert install_dirs(str(tmp_path / "absent")) == ["/var/lib/slurmqual", "/var/log/slurmqual"]
