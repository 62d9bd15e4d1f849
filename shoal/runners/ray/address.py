"""Where a ray run joins a cluster, and a check, in seconds, that a Ray cluster answers there.

``ray.init(address=...)`` retries an address where no Ray answers for minutes, printing
Ray's connection log; a run must instead fail at once with one line naming the address,
before its run directory exists. The check connects (TCP), sees a gRPC server answer
(HTTP/2) and asks it for the cluster id (Ray's GCS), each within a few seconds.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from shoal.errors import ConfigError

__all__ = ["cluster_address", "preflight"]


_PREFLIGHT_TIMEOUT = 3.0
"""Seconds the pre-flight of a cluster address waits for a connection, then an answer."""

_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""An HTTP/2 client's opening (its preface and an empty SETTINGS frame): a gRPC server,
as Ray's GCS and Ray Client servers are, answers with a SETTINGS frame of its own."""


def cluster_address(cfg: Any) -> tuple[str, str] | None:
    """The cluster address a run joins and where it was set (``ray.address`` or
    ``RAY_ADDRESS``); none: the run starts a local Ray."""
    if cfg.ray.address:
        return cfg.ray.address, "ray.address"
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
    return None


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


def _not_a_gcs(target: str) -> str | None:
    """Why the gRPC server at ``target`` is not a Ray cluster's GCS, or none if it is (or
    cannot be asked: ``grpcio`` absent, an answer other than these)."""
    try:
        import grpc
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except ImportError:
        return None
    with grpc.insecure_channel(target) as channel:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        try:
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=_PREFLIGHT_TIMEOUT)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                return (
                    "a server answers but it is not a Ray cluster's GCS; a Ray Client port "
                    "takes ray://HOST:PORT"
                )
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return f"the GCS there does not answer within {_PREFLIGHT_TIMEOUT:g} s"
    return None


def preflight(address: str, source: str) -> None:
    """A :class:`ConfigError` naming ``address`` (set by ``source``) unless a Ray cluster
    answers there, within seconds: ``ray.init`` retries an address where nothing answers
    for minutes. ``local`` (Ray starts one) and schemes other than ``ray://`` are Ray's."""
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
    why = _refusal(host, int(port)) or (None if client else _not_a_gcs(target))
    if why:
        raise ConfigError(f"{what}: no Ray cluster answers there ({seen}{why})")
