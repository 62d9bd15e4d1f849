"""Where a ray run's Ray is, and what the runner asks of it.

``ray.init(address=...)`` retries an address where no Ray answers for minutes, printing
Ray's connection log; a run must instead fail at once with one line naming the address,
before its run directory exists. The check connects (TCP), sees a gRPC server answer
(HTTP/2) and asks it for the cluster id (Ray's GCS), each within a few seconds.

A local Ray runs any code sent to its ports. Its core servers (GCS, raylet, every worker)
listen on all interfaces whatever the node address (Ray 2.60's gRPC servers bind 0.0.0.0;
measured: with ``RAY_AUTH_MODE=disabled`` the GCS of a Ray on 127.0.0.2 answered anyone on
the machine's network address too), so the token Ray asks for is what keeps others out:
the runner needs a Ray that asks for one by default (:func:`require_ray_version`).
Its node address is a loopback one where the machine has it (:func:`local_node_ip`).
"""

from __future__ import annotations

import os
import re
import socket
import sys
from typing import Any

from shoal.errors import ConfigError

__all__ = [
    "MIN_RAY_VERSION",
    "check_node_address",
    "cluster_address",
    "forget_saved_address",
    "local_unless_given",
    "local_auth_warning",
    "local_node_ip",
    "preflight",
    "require_ray_version",
]


_PREFLIGHT_TIMEOUT = 3.0
"""Seconds the pre-flight of a cluster address waits for a connection, then an answer."""

_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""An HTTP/2 client's opening (its preface and an empty SETTINGS frame): a gRPC server,
as Ray's GCS and Ray Client servers are, answers with a SETTINGS frame of its own."""

MIN_RAY_VERSION = (2, 59)
"""The first Ray whose local ``ray.init`` asks for a token by default (Ray 2.59; from 2.61
``ray start`` clusters do too). Before it a local Ray runs jobs for anyone who reaches its
ports, and those listen on every interface."""

_LOOPBACK_NODE_IP = "127.0.0.2"
"""The local Ray's node address: loopback, but not 127.0.0.1, which Ray 2.60 on Linux
rewrites to the machine's network address (``resolve_ip_for_localhost``)."""


def require_ray_version(version: str) -> None:
    """A :class:`ConfigError` naming ``version`` unless it is at least
    :data:`MIN_RAY_VERSION`: an older Ray's local cluster takes jobs without a token."""
    need = ".".join(map(str, MIN_RAY_VERSION))
    got = re.match(r"(\d+)\.(\d+)", version)
    if got and (int(got[1]), int(got[2])) >= MIN_RAY_VERSION:
        return
    raise ConfigError(
        f"Ray {version} is installed; the ray runner needs Ray >= {need} (older local Rays "
        f"run jobs for anyone who reaches their ports): pip install 'ray>={need}'"
    )


def local_node_ip() -> str | None:
    """The node address of the local Ray a run starts: :data:`_LOOPBACK_NODE_IP` on Linux
    where it can be bound; none elsewhere (Ray on macOS and Windows takes 127.0.0.1 itself,
    and macOS has no 127.0.0.2). Only the runtime-env agent binds the node address (at
    Ray 2.60): with none it listened on the machine's network address."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        with socket.socket() as s:
            s.bind((_LOOPBACK_NODE_IP, 0))
    except OSError:
        return None
    return _LOOPBACK_NODE_IP


def local_auth_warning() -> str | None:
    """A warning line if ``RAY_AUTH_MODE`` turns off the local Ray's token (Ray's opt-out,
    which the run respects): its ports then run jobs for anyone who reaches them."""
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is None or mode.lower() == "token":
        return None
    return (
        f"shoal: RAY_AUTH_MODE={mode!r}: the local Ray asks for no token and its ports "
        "listen on every interface; anyone who reaches them can run code here"
    )


def cluster_address(cfg: Any) -> tuple[str, str] | None:
    """The cluster address a run joins and where it was set (``ray.address`` or
    ``RAY_ADDRESS``); none: the run starts a local Ray."""
    if cfg.ray.address:
        return cfg.ray.address, "ray.address"
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
    return None


def forget_saved_address(address: str, what: str, again: str = "--ray-address") -> None:
    """Say that a resumed ``what`` (``"run"``, ``"study"``) will not join the cluster its
    saved config names: joining one lets whoever runs it send the driver objects to
    unpickle (Ray's security guide: connect only to clusters you control), so a received
    run resumes on a local Ray unless the user gives the address again (``again``)."""
    print(
        f"shoal: resuming on a local Ray: the {what}'s config names the cluster {address!r}, "
        f"which a resume joins only when given again ({again} {address})",
        file=sys.stderr,
    )


def local_unless_given(
    cfg: Any, what: str, again: str = "--ray-address", given: frozenset[str] = frozenset()
) -> None:
    """A resumed ``what``'s ray runs start a local Ray of this machine's: the cluster
    address its saved config names (``ray.address``) is dropped, said in one line
    (:func:`forget_saved_address`), and so are the local Ray's node address and directory
    (``ray.node_ip_address``, ``ray.temp_dir``: the machine's that made it; an address that
    is not this one's hangs ``ray.init`` for minutes), said in one line too. Keys the user
    gives again (``given``) stay."""
    ray = cfg.extra.get("ray")
    if cfg.run.runner != "ray" or ray is None:
        return
    dropped = []
    for key in ("node_ip_address", "temp_dir"):
        value = getattr(ray, key)
        if value is not None and f"ray.{key}" not in given:
            setattr(ray, key, None)
            dropped.append(f"ray.{key} = {value!r}")
    if dropped:
        print(
            f"shoal: resuming on this machine's own local Ray: the {what}'s config names "
            f"{' and '.join(dropped)}, which a resume keeps only when given again (--set)",
            file=sys.stderr,
        )
    address = ray.address
    if address and "ray.address" not in given:
        ray.address = None
        forget_saved_address(address, what, again)


def check_node_address(address: str | None) -> None:
    """A :class:`ConfigError` unless ``address`` (``ray.node_ip_address``; None: shoal's
    own) is an address of this machine, which the local Ray's daemons can bind: ``ray.init``
    on another machine's waits minutes for its raylet, printing Ray's warnings."""
    if address is None:
        return
    try:
        for family, kind, proto, _, where in socket.getaddrinfo(address, 0, 0, socket.SOCK_STREAM):
            with socket.socket(family, kind, proto) as s:
                s.bind(where)
            return
    except (OSError, UnicodeError, ValueError) as e:
        why = getattr(e, "strerror", None) or str(e) or type(e).__name__
    raise ConfigError(
        f"config key 'ray.node_ip_address': {address!r} is not an address of this machine "
        f"({why.lower()}); leave it unset (a loopback address) or name one of this machine's"
    )


def _refusal(host: str, port: int) -> str | None:
    """Why no gRPC server answers at ``host:port`` within :data:`_PREFLIGHT_TIMEOUT` (each
    of connect and answer), or none if one does."""
    t = _PREFLIGHT_TIMEOUT
    try:
        conn = socket.create_connection((host, port), timeout=t)
    except socket.gaierror:
        return f"unknown host {host!r}"
    except TimeoutError:
        return f"no connection within {t:g} s"
    except OSError as e:
        return (e.strerror or str(e)).lower()
    with conn:
        head = b""
        try:
            conn.sendall(_H2_PREFACE)
            while len(head) < 9 and (chunk := conn.recv(9 - len(head))):
                head += chunk
        except TimeoutError:
            return f"it accepts connections but sends nothing within {t:g} s: not Ray"
        except OSError:
            pass  # closed on us: judged by what came before
    if len(head) < 4 or head[3] != 4:  # not HTTP/2 (a dashboard's HTTP/1, say)
        return "something listens there but does not speak gRPC: not Ray"
    return None


def _driver_token() -> tuple[tuple[str, str], ...]:
    """The gRPC metadata carrying the token ``ray.init`` would send a cluster: none where
    this process has token authentication off (``RAY_AUTH_MODE``), no token, or a Ray
    without tokens."""
    try:
        from ray._raylet import (
            AuthenticationMode,
            AuthenticationTokenLoader,
            get_authentication_mode,
        )
    except ImportError:
        return ()
    if get_authentication_mode() != AuthenticationMode.TOKEN:
        return ()
    loader = AuthenticationTokenLoader.instance()
    if not loader.has_token():
        return ()
    return tuple(loader.get_token_for_http_header().items())


def _ask_gcs(target: str, token: tuple[tuple[str, str], ...]) -> str | None:
    """The gRPC status (``OK``, ``UNIMPLEMENTED``...) the server at ``target`` answers a
    request for the cluster id with, sent with ``token``; none if it cannot be asked
    (``grpcio`` absent)."""
    try:
        import grpc
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except ImportError:
        return None
    with grpc.insecure_channel(target) as channel:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        request = gcs_service_pb2.GetClusterIdRequest()
        try:
            stub.GetClusterId(request, timeout=_PREFLIGHT_TIMEOUT, metadata=token)
        except grpc.RpcError as e:
            return e.code().name
    return "OK"


_TOKEN_PLACES = "RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token"
"""Where ``ray.init`` reads a cluster's token from, first found first."""


def preflight(address: str, source: str) -> None:
    """A :class:`ConfigError` naming ``address`` (set by ``source``) unless a Ray cluster
    answers there and takes this driver's token if it asks for one, within seconds:
    ``ray.init`` retries an address where nothing answers for minutes. ``local`` (Ray
    starts one) and schemes other than ``ray://`` are Ray's; a Ray Client server
    (``ray://``) is only seen to answer."""
    what = f"{source} {address!r}"
    client = address.startswith("ray://")
    if address == "local" or ("://" in address and not client):
        return
    target = address.removeprefix("ray://")
    if client and ":" not in target.rpartition("]")[2]:
        target += ":10001"  # Ray Client's default port
    elif not client:  # auto, RAY_ADDRESS, localhost: where ray.init would connect
        try:
            from ray._private.services import canonicalize_bootstrap_address
        except ImportError:
            pass
        else:
            try:
                target = canonicalize_bootstrap_address(target, None) or target
            except ConnectionError as e:  # auto, and no cluster on this machine
                raise ConfigError(f"{what}: no running Ray cluster found on this machine") from e
            except ValueError:
                pass  # malformed: said below
    host, _, port = target.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{what}: not HOST:PORT (or ray://HOST:PORT, auto, local)")
    seen = "" if target == address.removeprefix("ray://") else f"{target}: "
    why = _refusal(host, int(port))
    token: tuple[tuple[str, str], ...] = ()
    status = None
    if why is None and not client:
        token = _driver_token()
        status = _ask_gcs(target, token)
    if status == "UNIMPLEMENTED":
        why = (
            "a server answers but it is not a Ray cluster's GCS; a Ray Client port takes "
            "ray://HOST:PORT"
        )
    elif status == "DEADLINE_EXCEEDED":
        why = f"the GCS there does not answer within {_PREFLIGHT_TIMEOUT:g} s"
    if why:
        raise ConfigError(f"{what}: no Ray cluster answers there ({seen}{why})")
    # A GCS that wants a token: ray.init without the right one retries for about 20 s,
    # printing a line a second (measured, Ray 2.60), then fails.
    if status == "UNAUTHENTICATED" and token:
        raise ConfigError(
            f"{what}: the Ray cluster there refuses this driver's token, read from {_TOKEN_PLACES}"
        )
    if status == "UNAUTHENTICATED":
        raise ConfigError(
            f"{what}: the Ray cluster there asks for a token: set RAY_AUTH_MODE=token and "
            f"give its token in {_TOKEN_PLACES}"
        )
