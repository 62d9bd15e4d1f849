"""A Ray cluster address where no Ray cluster answers (``--ray-address`` or ``RAY_ADDRESS``)
fails within seconds with one line naming it, exit code 2 and no run directory, where
``ray.init`` would retry for minutes; so does a cluster that asks for a token the driver
lacks, and a Ray too old to ask for one itself. Nothing here starts Ray."""

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from shoal.cli import main
from shoal.errors import ConfigError
from shoal.runners.ray import address
from shoal.runners.ray.address import local_auth_warning, require_ray_version

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.timeout(60)

SHOAL = str(Path(sys.executable).with_name("shoal"))
"""The venv's ``shoal`` command (tests run in the venv's Python)."""


@pytest.fixture(autouse=True)
def no_ray_session():
    """These runs must not find a Ray joined already (the runner would use it and skip the
    pre-flight), and must leave none behind."""
    if ray.is_initialized():
        pytest.skip("a Ray session is initialized in this process")
    yield
    assert not ray.is_initialized()


def train(capsys, out: Path, *argv: str) -> tuple[int, list[str], float]:
    """``shoal train cartpole --runner ray`` with ``argv``: exit code, stderr lines, wall
    seconds."""
    t0 = time.monotonic()
    code = main(["train", "cartpole", "--runner", "ray", "--out", str(out), *argv])
    wall = time.monotonic() - t0
    return code, capsys.readouterr().err.splitlines(), wall


def assert_no_run_dir(out: Path) -> None:
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1:1", "no Ray cluster answers there"),  # refused (Ray's node address)
        ("10.255.255.1:6379", "no Ray cluster answers there"),  # unroutable: no connection
        ("nohost.invalid:6379", "unknown host 'nohost.invalid'"),
        ("ray://127.0.0.1:1", "no Ray cluster answers there"),  # a Ray Client address
        ("nonsense", "not HOST:PORT"),
        ("10.0.0.1:99999", "not HOST:PORT"),
    ],
)
def test_an_address_without_a_ray_cluster_fails_fast_with_one_line(tmp_path, capsys, address, why):
    out = tmp_path / "out"
    code, err, wall = train(capsys, out, "--ray-address", address)
    assert code == 2
    assert len(err) == 1, err
    assert err[0].startswith(f"shoal: error: ray.address {address!r}: "), err
    assert why in err[0]
    assert wall < 20
    assert_no_run_dir(out)


def test_ray_address_from_the_environment_is_checked_too(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    out = tmp_path / "out"
    code, err, wall = train(capsys, out)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("shoal: error: RAY_ADDRESS '127.0.0.1:1': no Ray cluster answers")
    assert wall < 20
    assert_no_run_dir(out)


def serve(reply: bytes | None) -> tuple[str, threading.Event]:
    """A listener on 127.0.0.2 (Ray keeps that address as it is) that answers every
    connection with ``reply`` and closes it, or (none) accepts and never answers; its
    address and an event that stops it."""
    sock = socket.socket()
    sock.bind(("127.0.0.2", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    stop = threading.Event()

    def run() -> None:
        held = []
        with sock:
            while not stop.is_set():
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    continue
                if reply is None:
                    held.append(conn)
                    continue
                with conn:
                    conn.sendall(reply)
        for conn in held:
            conn.close()

    threading.Thread(target=run, daemon=True).start()
    return f"127.0.0.2:{sock.getsockname()[1]}", stop


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (None, "sends nothing within 3 s"),  # accepts, never answers
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "does not speak gRPC"),  # a dashboard, say
    ],
    ids=["silent", "http"],
)
def test_a_listener_that_is_not_ray_fails_fast(tmp_path, capsys, reply, why):
    address, stop = serve(reply)
    try:
        out = tmp_path / "out"
        code, err, wall = train(capsys, out, "--ray-address", address)
    finally:
        stop.set()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"shoal: error: ray.address {address!r}: no Ray cluster"), err
    assert why in err[0] and "not Ray" in err[0]
    assert wall < 20
    assert_no_run_dir(out)


def test_a_failed_join_past_the_pre_flight_is_one_line_naming_the_address(
    tmp_path, capsys, monkeypatch
):
    """A cluster gone between the pre-flight and ``ray.init``: Ray's error, in one line."""
    from shoal.runners.ray import runner

    def init(**kwargs):
        raise ConnectionError(f"Failed to connect to Ray cluster at {kwargs['address']}\nmore")

    monkeypatch.setattr(runner, "preflight", lambda address, source: None)
    monkeypatch.setattr(ray, "init", init)
    code, err, _ = train(capsys, tmp_path / "out", "--ray-address", "127.0.0.2:6379")
    assert code == 2 and len(err) == 1, err
    assert err[0] == (
        "shoal: error: ray.address '127.0.0.2:6379': could not join the Ray cluster there "
        "(Failed to connect to Ray cluster at 127.0.0.2:6379)"
    )


def test_the_shoal_command_fails_fast_without_ray_log(tmp_path):
    """The console script: exit code 2, stderr one line (none of Ray's log), seconds."""
    out = tmp_path / "out"
    argv = ["train", "cartpole", "--runner", "ray", "--ray-address", "127.0.0.1:1"]
    t0 = time.monotonic()
    done = subprocess.run(
        [SHOAL, *argv, "--out", str(out)], capture_output=True, text=True, timeout=50
    )
    assert time.monotonic() - t0 < 20
    assert done.returncode == 2 and done.stdout == ""
    err = done.stderr.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("shoal: error: ray.address '127.0.0.1:1': no Ray cluster answers")
    assert "connection refused" in err[0]
    assert_no_run_dir(out)


@pytest.mark.parametrize("version", ["2.59.0", "2.60.0", "2.61.0rc1", "3.0.0.dev0"])
def test_a_ray_that_asks_for_a_token_by_default_is_accepted(version):
    require_ray_version(version)


@pytest.mark.parametrize("version", ["2.58.2", "2.40.0", "1.99.0", "nightly"])
def test_an_older_ray_is_refused_naming_both_versions(version):
    with pytest.raises(ConfigError) as e:
        require_ray_version(version)
    assert str(e.value).startswith(f"Ray {version} is installed; the ray runner needs Ray >= 2.59")
    assert "\n" not in str(e.value)


def test_an_older_ray_fails_a_run_in_one_line_before_anything_starts(tmp_path, capsys, monkeypatch):
    """No Ray started (``no_ray_session`` checks), no run directory, exit code 2."""
    monkeypatch.setattr(ray, "__version__", "2.58.0")
    out = tmp_path / "out"
    code, err, wall = train(capsys, out)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("shoal: error: Ray 2.58.0 is installed; the ray runner needs Ray")
    assert "pip install 'ray>=2.59'" in err[0]
    assert wall < 20
    assert_no_run_dir(out)


@pytest.mark.parametrize("mode", ["disabled", "DISABLED", "nonsense"])
def test_a_local_ray_without_its_token_is_warned_of(monkeypatch, mode):
    monkeypatch.setenv("RAY_AUTH_MODE", mode)
    assert f"RAY_AUTH_MODE={mode!r}" in local_auth_warning()


@pytest.mark.parametrize("mode", [None, "token", "TOKEN"])
def test_a_local_ray_with_its_token_is_not_warned_of(monkeypatch, mode):
    if mode is None:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    else:
        monkeypatch.setenv("RAY_AUTH_MODE", mode)
    assert local_auth_warning() is None


@pytest.fixture
def gcs_with_a_token():
    """A gRPC server on 127.0.0.2 answering the GCS's cluster-id request only with the
    token ``right`` (as a Ray >= 2.59 cluster started with a token does); its address."""
    from concurrent import futures

    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    class Gcs(gcs_service_pb2_grpc.NodeInfoGcsServiceServicer):
        def GetClusterId(self, request, context):  # noqa: N802 - the gRPC method's name
            if dict(context.invocation_metadata()).get("authorization") != "Bearer right":
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "InvalidAuthToken")
            return gcs_service_pb2.GetClusterIdReply()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    gcs_service_pb2_grpc.add_NodeInfoGcsServiceServicer_to_server(Gcs(), server)
    port = server.add_insecure_port("127.0.0.2:0")
    server.start()
    yield f"127.0.0.2:{port}"
    server.stop(0)


def test_a_cluster_that_asks_for_a_token_the_driver_lacks_fails_fast(
    tmp_path, capsys, monkeypatch, gcs_with_a_token
):
    """Where ``ray.init`` would retry for about 20 s: one line saying what to set."""
    monkeypatch.setattr(address, "_driver_token", lambda: ())
    out = tmp_path / "out"
    code, err, wall = train(capsys, out, "--ray-address", gcs_with_a_token)
    assert code == 2 and len(err) == 1, err
    assert err[0] == (
        f"shoal: error: ray.address {gcs_with_a_token!r}: the Ray cluster there asks for a "
        "token: set RAY_AUTH_MODE=token and give its token in RAY_AUTH_TOKEN, "
        "RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token"
    )
    assert wall < 20
    assert_no_run_dir(out)


def test_a_cluster_that_refuses_the_drivers_token_fails_fast(monkeypatch, gcs_with_a_token):
    monkeypatch.setattr(address, "_driver_token", lambda: (("authorization", "Bearer wrong"),))
    with pytest.raises(ConfigError, match="refuses this driver's token"):
        address.preflight(gcs_with_a_token, "ray.address")


def test_a_cluster_that_takes_the_drivers_token_passes(monkeypatch, gcs_with_a_token):
    monkeypatch.setattr(address, "_driver_token", lambda: (("authorization", "Bearer right"),))
    address.preflight(gcs_with_a_token, "ray.address")
