"""RestAdapter without a cluster: where the JWT comes from and where it may
go (never to another host on a redirect, never over plain http to a remote
host or through a proxy, never to child processes, never from a file others
can read), rest_auth/local without a token, what each generation's server
can do (read from recorded real answers of slurmrestd, replayed by a real
HTTP server on loopback), and that the prolog path does not import requests."""

from __future__ import annotations

import http.server
import json
import os
import socketserver
import subprocess
import sys
import threading
import time

import pytest

from slurmqual.slurm import SlurmError
from slurmqual.slurm.rest import transport
from slurmqual.slurm.rest.adapter import RestAdapter
from slurmqual.slurm.rest.jobs import submit_body

REAL = os.path.join(os.path.dirname(__file__), "data", "real", "slurm")
RELEASES = sorted(d for d in os.listdir(REAL) if os.path.isdir(os.path.join(REAL, d)) and d[:2].isdigit())


@pytest.fixture(autouse=True)
def _no_stashed_env_token(monkeypatch):
    monkeypatch.setattr(transport, "_env_token", None)


def slurm_cfg(url="http://127.0.0.1:6820", token_file=None, **extra) -> dict:
    return {"rest": {"url": url, "user": "alice", "token_file": token_file, **extra}, "timeout_s": 5, "retries": 2}


def token_file(tmp_path, text="SLURM_JWT=eyJfile.secret\n", mode=0o600):
    tok = tmp_path / "jwt"
    tok.write_text(text)
    tok.chmod(mode)
    return str(tok)


# -- a real HTTP server on loopback that replays recorded slurmrestd answers ------------

class Replay:
    """Serves `routes` {path: (status, body, headers)}; records every request's
    path and headers. TCP on `host`, or a unix socket at `unix`."""

    def __init__(self, routes: dict, host: str = "127.0.0.1", unix: str | None = None):
        self.routes, self.seen = routes, []
        replay = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                replay.seen.append((self.command, self.path, dict(self.headers), body))
                status, text, headers = replay.routes.get((self.command, self.path.rstrip("/")),
                                                          replay.routes.get(self.path.rstrip("/"),
                                                                            (404, '{"errors": [{"error": "no"}]}', {})))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                data = text.encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *a):
                pass

            def address_string(self):
                return "unix"

        if unix:
            class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
                daemon_threads = True

                def get_request(self):
                    conn, _ = super().get_request()
                    return conn, ("unix", 0)

            self.server = Server(unix, Handler)
            self.url = f"unix://{unix}"
        else:
            self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
            self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def release_routes(release: str) -> dict:
    """Recorded answers of a real slurmrestd of `release` (tests/data/real/slurm)."""
    d = os.path.join(REAL, release)
    routes = {"/openapi/v3": (200, open(os.path.join(d, "openapi_v3_slurm_paths.json")).read(), {})}
    for name in os.listdir(d):
        if name.startswith("slurmrestd_v") and name.endswith(".json"):
            v, ep = name[len("slurmrestd_"):-len(".json")].split("_", 1)
            routes[f"/slurm/{v}/{ep}"] = (200, open(os.path.join(d, name)).read(), {})
    return routes


@pytest.fixture
def replay():
    servers = []

    def start(routes, **kw):
        s = Replay(routes, **kw)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


# -- where the token comes from ---------------------------------------------------

def test_token_file_wins_and_scontrol_token_output_is_accepted(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMRESTD_TOKEN", "eyJenv.secret")
    a = RestAdapter.from_config(slurm_cfg(token_file=token_file(tmp_path)))
    assert a._token == "eyJfile.secret" and a.user == "alice"
    assert "secret" not in repr(a) and "SLURM_JWT" not in os.environ


def test_token_leaves_the_environment_when_the_process_starts():
    """Not when the REST adapter is first used: `slurmqual check` runs mlxconfig
    and nvidia-smi long before (or without) any REST call."""
    code = ("from slurmqual.command import run; "
            "print(run(['sh', '-c', 'echo ${SLURMRESTD_TOKEN:-unset}'], 10).stdout.strip()); "
            "from slurmqual.slurm.rest import transport; print(transport.env_token()); print(transport.env_token())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "SLURMRESTD_TOKEN": "eyJstart.secret"}).stdout.split()
    assert out == ["unset", "eyJstart.secret", "eyJstart.secret"]


def test_token_from_env_is_taken_out_of_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMRESTD_TOKEN", "eyJenv.secret")
    assert RestAdapter.from_config(slurm_cfg())._token == "eyJenv.secret"
    assert "SLURMRESTD_TOKEN" not in os.environ            # so no child process inherits it
    child = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('SLURMRESTD_TOKEN'))"],
                           capture_output=True, text=True, check=True).stdout
    assert child.strip() == "None"
    assert RestAdapter.from_config(slurm_cfg())._token == "eyJenv.secret"   # still ours, for the next adapter


def test_missing_token_and_bad_token_files_are_clear(tmp_path):
    with pytest.raises(SlurmError, match="needs a JWT: set slurm.rest.token_file or SLURMRESTD_TOKEN"):
        RestAdapter.from_config(slurm_cfg())
    with pytest.raises(SlurmError, match=r"token_file .*nope: No such file"):
        RestAdapter.from_config(slurm_cfg(token_file=str(tmp_path / "nope")))
    for mode in (0o644, 0o604, 0o620):
        path = token_file(tmp_path, mode=mode)
        with pytest.raises(SlurmError, match=rf"readable or writable by others \(mode {mode:o}\).*chmod 600"):
            RestAdapter.from_config(slurm_cfg(token_file=path))
    os.symlink(token_file(tmp_path), tmp_path / "link")
    with pytest.raises(SlurmError, match="token_file"):
        RestAdapter.from_config(slurm_cfg(token_file=str(tmp_path / "link")))


def test_unix_socket_url_is_encoded_for_requests_unixsocket():
    a = RestAdapter("unix:///run/slurmrestd/sock", None, "t")
    assert a.unix and a.base == "http+unix://%2Frun%2Fslurmrestd%2Fsock"
    assert RestAdapter("unix:/run/s.sock", None, "t").base == "http+unix://%2Frun%2Fs.sock"


def test_unreachable_unix_socket_is_a_clear_error_in_bounded_time(tmp_path):
    a = RestAdapter(f"unix://{tmp_path}/absent.sock", "root", "t", timeout=2, retries=2)
    start = time.monotonic()
    with pytest.raises(SlurmError, match="unreachable"):
        a.node_info()
    assert time.monotonic() - start < 10


# -- where the token may go -------------------------------------------------------------

def test_redirect_to_another_host_is_not_followed_and_the_token_stays_home(replay):
    other = replay(release_routes("22.05"), host="127.0.0.2")
    home = replay({"/openapi/v3": (307, "", {"Location": other.url + "/openapi/v3"})})
    a = RestAdapter(home.url, "root", "eyJsecret", timeout=5, retries=1)
    with pytest.raises(SlurmError, match=r"HTTP 307 redirect to 127\.0\.0\.2:\d+; not followed"):
        a.node_info()
    assert other.seen == []
    assert home.seen[0][2]["X-SLURM-USER-TOKEN"] == "eyJsecret"


def test_plain_http_to_a_remote_host_or_through_a_proxy_is_refused(replay, monkeypatch):
    remote = RestAdapter("http://slurm.example.org:6820", "root", "eyJsecret", timeout=2, retries=1)
    with pytest.raises(SlurmError, match="refusing to send the JWT over plain http:// to slurm.example.org"):
        remote.node_info()
    home = replay(release_routes("22.05"))
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    proxied = RestAdapter(home.url, "root", "eyJsecret", timeout=2, retries=1)
    with pytest.raises(SlurmError, match=r"through a proxy \(http_proxy\).*allow_insecure_http"):
        proxied.node_info()
    assert home.seen == []


def test_site_may_allow_plain_http_explicitly(replay, tmp_path):
    home = replay(release_routes("22.05"))
    cfg = slurm_cfg(url=home.url, token_file=token_file(tmp_path), allow_insecure_http=True)
    a = RestAdapter.from_config(cfg)
    assert {n.name for n in a.node_info()} == {"n1", "n2", "n3"}


def test_unix_socket_with_rest_auth_local_sends_no_token(replay, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMRESTD_TOKEN", "eyJenv.secret")   # present, but not for a local-auth socket
    server = replay(release_routes("22.05"), unix=str(tmp_path / "restd.sock"))
    a = RestAdapter.from_config(slurm_cfg(url=server.url))
    assert a._token is None and "auth=local" in repr(a)
    nodes = {n.name: n for n in a.node_info()}
    assert nodes["n2"].drained and nodes["n2"].reason == "admin: RMA ticket 42"
    assert server.seen and all("X-SLURM-USER-TOKEN" not in h and "X-SLURM-USER-NAME" not in h
                               for _, _, h, _ in server.seen)


# -- what each generation can do ----------------------------------------------------------

@pytest.mark.parametrize("release", RELEASES)
def test_capabilities_come_from_the_servers_own_spec(release, replay):
    server = replay(release_routes(release))
    a = RestAdapter(server.url, "root", "eyJsecret", timeout=5, retries=1)
    gen = a.generation
    assert a.version == f"v0.0.{gen}"
    nodes = {n.name: n for n in a.node_info()}
    assert nodes["n2"].drained and nodes["n2"].reason == "admin: RMA ticket 42"
    if gen <= 38:
        for call in (lambda: a.drain(["n1"], "slurmqual: x: y"), lambda: a.resume(["n1"]),
                     lambda: a.create_reservation("r", ["n1"], 5)):
            with pytest.raises(SlurmError, match=f"needs scontrol on this host: slurmrestd v0.0.{gen} cannot"):
                call()
    else:
        assert a.can("POST", "/node/{node_name}")
    assert a.can("POST", "/reservation") == (gen >= 43)


def test_submit_export_list_takes_values_by_name(monkeypatch):
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0,mlx5_1")
    monkeypatch.delenv("UCX_TLS", raising=False)
    body = submit_body(42, ["--export=PATH,NCCL_IB_HCA,UCX_TLS,SLURMQUAL_CONFIG=/etc/sq.toml"], "true")
    env = dict(e.split("=", 1) for e in body["job"]["environment"])
    assert env["SLURMQUAL_CONFIG"] == "/etc/sq.toml" and env["PATH"]
    assert env["NCCL_IB_HCA"] == "mlx5_0,mlx5_1"   # by name: the value may hold commas
    assert "UCX_TLS" not in env


def test_submit_bodies_per_generation():
    argv = ["--job-name=j", "--nodes=2-4", "--time=00:30:00", "--exclusive", "--nodelist=n[1-2]", "--exclude=n3",
            "--export=ALL,SLURMQUAL_CONFIG=/etc/sq.toml", "--comment=slurmqual-submit-0123"]
    with pytest.raises(SlurmError, match="--nodelist is not supported by slurmrestd v0.0.38: needs sbatch"):
        submit_body(38, argv, "true")
    old = submit_body(38, [a for a in argv if not a.startswith(("--nodelist", "--exclude"))], "true")
    assert old["script"].endswith("true\n") and old["job"]["exclusive"] == "user"
    assert old["job"]["environment"]["SLURMQUAL_CONFIG"] == "/etc/sq.toml" and old["job"]["nodes"] == [2, 4]
    for gen in (39, 42, 45):
        body = submit_body(gen, argv, "true")
        job = body["job"]
        assert job["required_nodes"] == ["n1", "n2"] and job["excluded_nodes"] == ["n3"]
        assert "SLURMQUAL_CONFIG=/etc/sq.toml" in job["environment"] and job["script"].endswith("true\n")
        assert job["time_limit"] == 30 and job["comment"] == "slurmqual-submit-0123"
        assert (job.get("shared") == ["none"]) == (gen >= 40)


def test_slow_rest_submission_is_sent_once_and_found_by_its_mark(replay):
    """The server takes the job but answers too late: the adapter finds the job
    by its comment mark in GET jobs instead of posting it again."""
    routes = release_routes("22.05")
    jobs_doc = json.loads(routes["/slurm/v0.0.38/jobs"][1])
    array_id = next(j["array_job_id"] for j in jobs_doc["jobs"] if j["array_job_id"])
    posted = []
    server = replay(routes)
    orig = server.server.RequestHandlerClass.do_POST

    def slow_post(handler):
        posted.append(handler.path)
        mark = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))["job"]["comment"]
        server.routes["/slurm/v0.0.38/jobs"] = (200, routes["/slurm/v0.0.38/jobs"][1].replace(
            "slurmqual-submit-0123456789abcdef", mark), {})
        time.sleep(3)
        handler.send_response(200)
        handler.end_headers()

    server.server.RequestHandlerClass.do_POST = slow_post
    try:
        a = RestAdapter(server.url, "root", "eyJsecret", timeout=1, retries=3)
        job = a.submit(["--job-name=arr", "--array=0-2"], script="sleep 1")
    finally:
        server.server.RequestHandlerClass.do_POST = orig
    assert posted == ["/slurm/v0.0.38/job/submit"]
    assert job == str(array_id)


def test_hook_path_does_not_import_requests():
    code = ("import sys, slurmqual.hooks, slurmqual.slurm, slurmqual.slurm.rest; "
            "print('requests' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
