"""Check that an address is a Dask scheduler before ``distributed`` reads from it.

distributed's TCP comm reads the first 8 bytes of every message as its length and
allocates a buffer of that size before reading it (``distributed/comm/tcp.py``, checked
on distributed 2026.8). A peer that is not a Dask scheduler therefore breaks the client in
unhelpful ways: an SSH server's banner ``SSH-2.0-`` reads as 3.3e18 bytes and numpy
fails to allocate 2.8 EiB, an HTTP answer likewise, and a silent port blocks the
handshake for ever. :func:`probe_scheduler` looks first, with a plain socket and bounded
reads, and reports what it found:

1. the address scheme is one distributed knows (``tcp://``, ``tls://``; ``http://`` is the
   dashboard's) - :func:`check_scheme`;
2. the host name resolves (DNS), in a thread bounded by the timeout;
3. the TCP connection is accepted (not refused, not dropped) and, for ``tls://``, the TLS
   handshake completes with the client's certificates;
4. the peer sends a Dask handshake: a scheduler writes one as soon as it accepts a
   connection, a frame of ``8-byte length | 8-byte frame count | 8-byte frame lengths |
   msgpack dict``. The length must be small (a handshake is under 1 KiB; at most
   :data:`MAX_HANDSHAKE_BYTES` is read), the frame table must add up and the first frame
   must decode to a msgpack map. Nothing is unpickled.

To make services that wait for the client (HTTP servers) answer at once, the probe first
sends ``dkrr\\r\\n``: six bytes, fewer than a Dask length prefix, so a real scheduler,
which reads 8, only sees a client that closed before its handshake (logged at INFO level),
while an HTTP server answers "400 Bad request". Everything happens within one deadline of
``timeout`` seconds.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

from .errors import InvalidParameterError, SchedulerProbeError

__all__ = ["MAX_HANDSHAKE_BYTES", "check_scheme", "probe_scheduler"]

#: the most bytes read from a peer's first message (a Dask handshake is about 60 bytes)
MAX_HANDSHAKE_BYTES = 1 << 20

_PROBE = b"dkrr\r\n"
_PROBED_SCHEMES = ("tcp", "tls")
_DASK_SCHEMES = ("tcp", "tls", "inproc", "ucx", "ws", "wss")
_HEADER = struct.Struct("Q")  # distributed's length prefix (native byte order, as tcp.py)


#: what the probe raises (the reason it found), defined with every error in dkrr.errors
ProbeError = SchedulerProbeError


def check_scheme(address: str) -> None:
    """Raise :class:`InvalidParameterError` unless ``address`` has a Dask comm scheme.

    Parameters
    ----------
    address : str
        ``scheme://host:port``.
    """
    scheme = address.split("://", 1)[0].lower() if "://" in address else "tcp"
    if scheme in _DASK_SCHEMES:
        return
    if scheme in ("http", "https"):
        hint = (
            f"{scheme}:// is the scheme of the Dask dashboard (usually port 8787); the "
            "scheduler itself listens on tcp://host:8786"
        )
    elif scheme == "ssh":
        hint = (
            "to reach a scheduler through SSH, forward its port (ssh -L 8786:localhost:8786 "
            "HOST) and use tcp://127.0.0.1:8786"
        )
    else:
        hint = "use tcp://host:8786 (or tls://host:8786 for a TLS cluster)"
    raise InvalidParameterError(
        f"The scheduler address {address!r} has the scheme '{scheme}://', which is not a Dask "
        f"comm scheme (tcp://, tls://, ws://, wss://, ucx://, inproc://): {hint}."
    )


def _preview(data: bytes) -> str:
    return repr(bytes(data[:40])) + ("..." if len(data) > 40 else "")


def _what_it_is(data: bytes) -> str:
    head = bytes(data[:16]).lstrip().lower()
    if head.startswith(b"ssh-"):
        return "; it is an SSH server"
    if head.startswith((b"http/", b"<!doctype", b"<html")):
        return (
            "; it is an HTTP server (the Dask dashboard is HTTP, usually on port 8787; the "
            "scheduler usually listens on 8786)"
        )
    return ""


def _resolve(host: str, port: int, deadline: float):
    """``getaddrinfo`` in a daemon thread (it has no timeout of its own), bounded by the deadline."""
    result = {}

    def lookup():
        try:
            result["infos"] = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
        except OSError as exc:
            result["error"] = exc

    thread = threading.Thread(target=lookup, name="dkrr dns lookup", daemon=True)
    thread.start()
    thread.join(max(deadline - time.monotonic(), 0.001))
    if thread.is_alive():
        raise ProbeError(f"the DNS lookup of {host!r} did not finish in time")
    if "error" in result:
        exc = result["error"]
        raise ProbeError(f"could not resolve the host name {host!r} (DNS: {exc.strerror or exc})")
    return result["infos"]


def _connect(host: str, port: int, deadline: float, timeout: float) -> socket.socket:
    error = None
    for family, kind, proto, _, sockaddr in _resolve(host, port, deadline):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sock.connect(sockaddr)
            return sock
        except ConnectionRefusedError:
            error = f"connection refused: nothing listens on port {port} of {host}"
        except TimeoutError:
            error = (
                f"no answer to the connection request within {timeout:g} s (host down, or a "
                "firewall drops the packets)"
            )
        except OSError as exc:
            error = f"could not connect: {exc.strerror or exc}"
        sock.close()
        if time.monotonic() >= deadline:
            break
    raise ProbeError(error or f"no address found for {host!r}")


def _start_tls(sock, security, deadline: float, timeout: float):
    import ssl

    args = security.get_connection_args("client")
    context = args.get("ssl_context")
    if context is None:
        raise ProbeError("no TLS context for the client (give the CA and client certificates)")
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        return context.wrap_socket(sock, server_hostname=args.get("server_hostname"))
    except TimeoutError:
        raise ProbeError(f"the TLS handshake did not complete within {timeout:g} s") from None
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc.strerror or str(exc)
        raise ProbeError(
            f"the TLS handshake failed ({reason}): the peer does not speak TLS, or its "
            "certificate or the client's is not signed by the CA given"
        ) from None


def _read_some(sock, data: bytearray, need: int, deadline: float, timeout: float, tls: bool) -> None:
    """Read into ``data`` until it holds ``need`` bytes; ProbeError on close or timeout."""
    import ssl

    while len(data) < need:
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = sock.recv(min(65536, need - len(data)) if len(data) >= 8 else 4096)
        except TimeoutError:
            if not data:
                raise ProbeError(
                    f"the peer accepted the connection but sent nothing within {timeout:g} s: it "
                    "is not a Dask scheduler (a scheduler sends its handshake at once; is this "
                    "another service, or a hung scheduler?)"
                ) from None
            raise ProbeError(
                f"not a Dask scheduler: it sent {_preview(data)} and then nothing within "
                f"{timeout:g} s{_what_it_is(data)}"
            ) from None
        except ssl.SSLError as exc:
            if not data:
                raise ProbeError(
                    f"the TLS connection was ended by the peer ({exc.reason or exc}): a TLS "
                    "scheduler does this when it rejects the client certificate (signed by "
                    "another CA than the cluster's?)"
                ) from None
            chunk = b""
        except OSError:  # reset by the peer
            chunk = b""
        if not chunk:
            if not data and tls:
                raise ProbeError(
                    "the peer closed the TLS connection without sending a Dask handshake: a TLS "
                    "scheduler does this when it rejects the client certificate (signed by "
                    "another CA than the cluster's?)"
                )
            if not data:
                raise ProbeError(
                    "the peer closed the connection without sending a Dask handshake: it is not "
                    "a Dask scheduler (is this the dashboard port, a TLS scheduler (use tls://), "
                    "a proxy or another service?)"
                )
            raise ProbeError(
                f"not a Dask scheduler: it sent {_preview(data)} and closed the connection"
                f"{_what_it_is(data)}"
            )
        data += chunk


def _check_handshake(data: bytes) -> None:
    """``data`` is a whole first message: length | count | lengths | frames (msgpack first)."""
    import msgpack

    body = memoryview(data)[_HEADER.size:]
    (count,) = _HEADER.unpack_from(body)
    ok = 1 <= count <= 64 and len(body) >= _HEADER.size * (1 + count)
    if ok:
        lengths = struct.unpack_from(f"{count}Q", body, _HEADER.size)
        start = _HEADER.size * (1 + count)
        ok = start + sum(lengths) == len(body)
    if ok:
        try:
            ok = isinstance(msgpack.unpackb(body[start:start + lengths[0]], raw=False,
                                            strict_map_key=False), dict)
        except Exception:  # noqa: BLE001 - any decoding failure means "not a handshake"
            ok = False
    if not ok:
        raise ProbeError(
            f"not a Dask scheduler: its first message {_preview(data)} is not a Dask handshake"
            f"{_what_it_is(data)}"
        )


def probe_scheduler(address: str, security=None, timeout: float = 30.0) -> None:
    """Raise :class:`ProbeError` unless a Dask scheduler answers at ``address`` in time.

    Only ``tcp://`` and ``tls://`` addresses are probed (others return at once). See the
    module docstring for the steps and what each failure reports.

    Parameters
    ----------
    address : str
        ``tcp://host:port`` or ``tls://host:port``.
    security : distributed.security.Security, default=None
        Client TLS settings (required for ``tls://``).
    timeout : float, default=30.0
        Seconds for the whole probe (DNS, connection, TLS, first message).

    Raises
    ------
    ProbeError
        A ``ConnectionError`` whose message says what went wrong: DNS, refused, no answer,
        TLS handshake, closed, silent, or not a Dask scheduler (with the bytes it sent).
    InvalidParameterError
        The scheme is not a Dask comm scheme, or the address has no port or a port
        outside 1-65535.
    """
    from distributed.comm.addressing import parse_address, parse_host_port, unparse_host_port

    check_scheme(address)
    scheme, location = parse_address(address)
    if scheme not in _PROBED_SCHEMES:
        return
    try:
        host, port = parse_host_port(location)
    except ValueError:
        raise InvalidParameterError(
            f"The scheduler address {address!r} has no port: use {scheme}://host:8786."
        ) from None
    if not 1 <= int(port) <= 65535:  # the socket layer would call it refused or a DNS failure
        raise InvalidParameterError(
            f"port {port} is not a valid TCP port (1-65535) in the scheduler address {address!r}; "
            f"a Dask scheduler listens on port 8786 by default ({scheme}://{unparse_host_port(host, 8786)})."
        )
    deadline = time.monotonic() + timeout
    sock = _connect(host, int(port), deadline, timeout)
    try:
        if scheme == "tls":
            if security is None:
                raise ProbeError("a tls:// address needs the client's TLS certificates")
            sock = _start_tls(sock, security, deadline, timeout)
        try:
            sock.sendall(_PROBE)
        except OSError:
            pass  # a peer that already closed is reported by the read below
        data = bytearray()
        _read_some(sock, data, _HEADER.size, deadline, timeout, scheme == "tls")
        (length,) = _HEADER.unpack_from(data)
        if not _HEADER.size * 2 <= length <= MAX_HANDSHAKE_BYTES:
            raise ProbeError(
                f"not a Dask scheduler: its first bytes {_preview(data)} read as a Dask length "
                f"prefix declare a message of {length} bytes (a handshake is under 1 KiB){_what_it_is(data)}"
            )
        _read_some(sock, data, _HEADER.size + length, deadline, timeout, scheme == "tls")
        _check_handshake(bytes(data[: _HEADER.size + length]))
    finally:
        sock.close()
