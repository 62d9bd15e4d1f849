"""The ray runner with Ray processes of its own, run in a subprocess (this test process may
hold the suite's own local Ray): a real two-node cluster on this machine (a head on
127.0.0.2 and a second node on 127.0.0.3, one CPU each, actors asking for one CPU each, so
the two actors must run on different nodes) joined with ``--ray-address``; and a run on its
embedded Ray, whose ports are checked, cut by Ctrl-C. Node addresses are loopback ones, but
Ray's core servers listen on every interface (Ray 2.60 binds them to 0.0.0.0); each Ray's
own temp dir names its processes, so stopping it leaves any other Ray alone.
"""

import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics

pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

RAY = str(Path(sys.executable).with_name("ray"))
"""The venv's ``ray`` command (tests run in the venv's Python)."""


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def cluster_processes(temp_dir: str) -> list[int]:
    """Pids of the processes of the test cluster: those whose command line or open files
    name its temp dir (Ray's agents rewrite their command line and environment, but keep
    their logs there open)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            names = [(entry / "cmdline").read_bytes().decode(errors="replace")]
            names += [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        if any(temp_dir in name for name in names):
            found.append(int(entry.name))
    return found


def listening(pids: list[int]) -> list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """The TCP addresses the processes ``pids`` listen on (from /proc: sockets whose inode
    one of them holds open)."""
    inodes = set()
    for pid in pids:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        inodes |= {link[8:-1] for link in links if link.startswith("socket:[")}
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            ip_hex, port_hex = fields[1].split(":")
            raw = bytes.fromhex(ip_hex)  # 32-bit words in host (little-endian) order
            ip = ipaddress.ip_address(b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4)))
            found.append((ip, int(port_hex, 16)))
    return found


TOKEN_CHECKED = [  # one method of each service Ray's core servers hold; empty requests
    "/ray.rpc.NodeInfoGcsService/GetAllNodeInfo",  # the GCS
    "/ray.rpc.NodeManagerService/GetNodeStats",  # the raylet's node manager
    "/ray.rpc.ObjectManagerService/Pull",  # the raylet's object manager
    "/ray.rpc.CoreWorkerService/NumPendingTasks",  # the driver and each worker
]


def token_answers(port: int) -> set[str]:
    """The gRPC statuses the server on ``port`` (reached on 127.0.0.1) answers the
    :data:`TOKEN_CHECKED` methods with, called without a token."""
    import grpc

    answers = set()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        for method in TOKEN_CHECKED:
            try:
                channel.unary_unary(method)(b"", timeout=5)
                answers.add("OK")
            except grpc.RpcError as e:
                answers.add(e.code().name)
    return answers


def assert_loopback_or_behind_a_token(pids: list[int]) -> None:
    """Every port of the Ray processes ``pids`` listens on a loopback address, or on every
    interface (Ray's core servers: measured so at 2.60, whatever the node address) and
    refuses a caller without the cluster's token. None binds the machine's own network
    address (the runtime-env agent did, before the node address was loopback)."""
    ports = listening(pids)
    assert ports, "found no listening port of the run's Ray"
    for ip, port in ports:
        if ip.is_loopback:
            continue
        assert ip.is_unspecified, f"{ip}:{port}: a port on a network address"
        answers = token_answers(port)
        assert "UNAUTHENTICATED" in answers and "OK" not in answers, (port, answers)


def wait_for_nodes(address: str, env: dict, *, count: int, timeout: float = 60.0) -> None:
    """Until the cluster at ``address`` has ``count`` live nodes: ``ray start`` of a second
    node returns before the head counts it, and on a loaded machine a run that starts then
    places both actors' work on the head alone."""
    probe = (  # live nodes whose CPUs the scheduler counts (one each here)
        f"import ray; ray.init(address={address!r}); "
        "print(min(sum(n['Alive'] for n in ray.nodes()), "
        "int(ray.available_resources().get('CPU', 0))))"
    )
    deadline = time.monotonic() + timeout
    alive = 0
    while time.monotonic() < deadline:
        done = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
        )
        lines = done.stdout.strip().splitlines()
        alive = int(lines[-1]) if lines and lines[-1].isdigit() else 0
        if alive >= count:
            return
        time.sleep(1.0)
    raise AssertionError(f"the test cluster has {alive} live nodes after {timeout} s, not {count}")


@pytest.fixture
def two_nodes(tmp_path):
    temp_dir = f"/tmp/shoal-ray-{os.getpid()}-{time.monotonic_ns() % 100000}"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    port = free_port("127.0.0.2")
    common = ["--num-cpus", "1", "--disable-usage-stats"]
    head = [RAY, "start", "--head", "--node-ip-address", "127.0.0.2", "--port", str(port)]
    head += ["--temp-dir", temp_dir, "--include-dashboard", "false", *common]
    second = [RAY, "start", "--address", f"127.0.0.2:{port}", "--node-ip-address", "127.0.0.3"]
    try:
        subprocess.run(head, env=env, check=True, capture_output=True, timeout=120)
        subprocess.run(second, env=env, check=True, capture_output=True, timeout=120)
        wait_for_nodes(f"127.0.0.2:{port}", env, count=2)
        yield f"127.0.0.2:{port}", env
    finally:
        deadline = time.monotonic() + 20
        while (left := cluster_processes(temp_dir)) and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.5)
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not cluster_processes(temp_dir), "the test cluster left processes behind"


def test_a_run_joins_a_two_node_cluster_and_uses_both_nodes(tmp_path, two_nodes):
    address, env = two_nodes
    cmd = [str(Path(sys.executable).with_name("shoal")), "train", "cartpole", "--runner", "ray"]
    # Long enough that the second node's actor (a process that imports torch on a loaded
    # machine) answers before the run ends: at 1,500 steps a full-suite run once ended
    # on the head's actor alone.
    cmd += ["--workers", "2", "--ray-address", address, "--steps", "6000", "--no-progress"]
    cmd += ["--set", "ray.actor_cpus=1", "--set", "run.learning_starts=200"]
    cmd += ["--set", "run.stop_return=none"]
    cmd += ["--set", "run.log_every=100", "--run-dir", str(tmp_path / "r")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_metrics(RunDir(tmp_path / "r").metrics)
    nodes = [float(r["ray_nodes"]) for r in rows if r.get("ray_nodes")]
    assert max(nodes) == 2


def test_an_embedded_ray_asks_for_its_token_and_ctrl_c_leaves_no_ray_process(tmp_path):
    """The local Ray a run starts (shoal's defaults, Ray's default authentication): its
    ports are loopback ones or refuse callers without its token; Ctrl-C checkpoints and
    stops it. One test: a Ray start costs seconds."""
    temp_dir = f"/tmp/shoal-ray-{os.getpid()}-{time.monotonic_ns() % 100000}"
    cmd = [str(Path(sys.executable).with_name("shoal")), "train", "cartpole", "--runner", "ray"]
    # A run that cannot end before the Ctrl-C (the preset's would solve CartPole first).
    cmd += ["--workers", "2", "--steps", "1000000", "--no-progress"]
    cmd += ["--set", "run.stop_return=none", "--set", f"ray.temp_dir='{temp_dir}'"]
    cmd += ["--set", "run.log_every=100", "--run-dir", str(tmp_path / "r")]
    # Ray's default authentication: none of this process's (a local Ray started here sets
    # RAY_AUTH_MODE=token in it; a shell may have set it to disabled).
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # A terminal's Ctrl-C reaches the whole process group: the run and its Ray.
    # A suite started in the background (`make test &`) inherits SIGINT ignored, and so
    # would the run: give it the default, as a terminal's run has.
    proc = subprocess.Popen(
        cmd,
        env=env,
        start_new_session=True,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        metrics = RunDir(tmp_path / "r").metrics
        deadline = time.monotonic() + 90  # + 180 below: inside the 300 s limit
        while time.monotonic() < deadline and not (
            metrics.is_file() and len(read_metrics(metrics)) > 5
        ):
            time.sleep(0.5)
        assert metrics.is_file(), "the run did not start"
        assert_loopback_or_behind_a_token(cluster_processes(temp_dir))
        rows = len(read_metrics(metrics))
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 130, f"{rows} metrics rows at the Ctrl-C\n{err[-3000:]}"
        assert RunDir(tmp_path / "r").checkpoint.is_file()
        time.sleep(2.0)  # Ray's daemons exit after the driver's shutdown
        assert not cluster_processes(temp_dir), "Ray processes outlived the run"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in cluster_processes(temp_dir):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp_dir, ignore_errors=True)
