"""RestAdapter set-up without a cluster: where the JWT comes from, that it is
never shown or exported, and that the prolog path does not import requests."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from slurmqual.slurm import SlurmError
from slurmqual.slurm.rest import RestAdapter


def slurm_cfg(url="http://127.0.0.1:6820", token_file=None) -> dict:
    return {"rest": {"url": url, "user": "alice", "token_file": token_file}, "timeout_s": 5, "retries": 2}


def test_token_file_wins_and_scontrol_token_output_is_accepted(tmp_path, monkeypatch):
    tok = tmp_path / "jwt"
    tok.write_text("SLURM_JWT=eyJfile.secret\n")
    monkeypatch.setenv("SLURMRESTD_TOKEN", "eyJenv.secret")
    a = RestAdapter.from_config(slurm_cfg(token_file=str(tok)))
    assert a._token == "eyJfile.secret" and a.user == "alice"
    assert "secret" not in repr(a) and "SLURM_JWT" not in os.environ


def test_token_from_env_and_missing_token_is_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMRESTD_TOKEN", "eyJenv.secret")
    assert RestAdapter.from_config(slurm_cfg())._token == "eyJenv.secret"
    monkeypatch.delenv("SLURMRESTD_TOKEN")
    with pytest.raises(SlurmError, match="needs a JWT: set slurm.rest.token_file or SLURMRESTD_TOKEN"):
        RestAdapter.from_config(slurm_cfg())
    with pytest.raises(SlurmError, match=r"token_file .*nope: No such file"):
        RestAdapter.from_config(slurm_cfg(token_file=str(tmp_path / "nope")))


def test_unix_socket_url_is_encoded_for_requests_unixsocket():
    a = RestAdapter("unix:///run/slurmrestd/sock", None, "t")
    assert a.unix and a.base == "http+unix://%2Frun%2Fslurmrestd%2Fsock"
    assert RestAdapter("unix:/run/s.sock", None, "t").base == "http+unix://%2Frun%2Fs.sock"


def test_unreachable_unix_socket_is_a_clear_error_in_bounded_time(tmp_path):
    a = RestAdapter(f"unix://{tmp_path}/absent.sock", "root", "t", timeout=2, retries=2)
    with pytest.raises(SlurmError, match="unreachable") as err:
        a.node_info()


def test_hook_path_does_not_import_requests():
    code = ("import sys, slurmqual.hooks, slurmqual.slurm, slurmqual.slurm.rest; "
            "print('requests' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
