"""Running the application: uvicorn on a socket of our own, API keys, and a clean stop on SIGTERM or Ctrl-C."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
import socket
from collections.abc import Callable
from pathlib import Path

import uvicorn

from mt.core.errors import MtError
from mt.data.glossary import Glossary
from mt.decode.translator import Translator
from mt.serve.app import create_app
from mt.serve.limits import ServeConfig

log = logging.getLogger(__name__)

BACKLOG_DRAIN = 0.05  # s: how long a stop goes on accepting before it closes the listener
FIRST_REQUEST_GRACE = 2.0  # s: how long a stop waits for the first request of a connection made before it


def serve(translator: Translator, engine: str, limits: ServeConfig, host: str, port: int,
          api_keys: frozenset[str] = frozenset(), glossary: Glossary | None = None, soft: bool = False,
          suggestions: Path | None = None, load: Callable[[Path], Translator] | None = None) -> None:
    """Serve until SIGTERM or Ctrl-C, which stop accepting, finish the requests in flight, and return. `load`: how
    POST /api/model loads another checkpoint (create_app)."""
    sock = _listen(host, port)
    address = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}"
    if not ipaddress.ip_address(sock.getsockname()[0]).is_loopback and not api_keys:
        log.warning(f"listening on {host}, which other machines can reach, with no API keys (--api-keys FILE)")
    config = uvicorn.Config(create_app(translator, engine, limits, api_keys, glossary, soft, suggestions, load),
                            log_level="warning", access_log=False,
                            timeout_graceful_shutdown=int(limits.request_timeout) + 5)
    server = Server(config, f"serving {engine} on {address} (the page at /, LibreTranslate's API at /translate; "
                            "Ctrl-C stops)")
    # uvicorn catches SIGTERM and SIGINT for its graceful shutdown while it runs, then raises them again for the
    # handlers it found. The server's own handler around it: a stop that comes while uvicorn starts is kept, and
    # the signal raised again is a normal return (exit status 0).
    previous = {sig: signal.signal(sig, server.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("stopped")


class Server(uvicorn.Server):
    """uvicorn's server, with a stop that loses no request sent before it. It accepts for BACKLOG_DRAIN more, so
    that the connections waiting in the listener's backlog are not reset when it closes. And, as Go's net/http
    does, it takes a connection that has not sent its first request for a request on its way (the client sent it as
    soon as it connected; the server had not read it yet), not for an idle one, as uvicorn does: it gets
    FIRST_REQUEST_GRACE to begin its request, which is answered, and the connection closed. Connections idle between
    requests are closed at once. It says `ready` once it serves."""

    def __init__(self, config: uvicorn.Config, ready: str):
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:  # only now: the listener is served and a stop signal is uvicorn's to handle
            log.info(self.ready)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await asyncio.sleep(BACKLOG_DRAIN)  # the loop goes on: it accepts and reads what waits in the backlog
        fresh = [c for c in self.server_state.connections if getattr(c, "cycle", False) is None]
        for connection in fresh:
            connection.shutdown = _not_yet  # uvicorn's shutdown would close it
        spared = asyncio.create_task(_close_after_first_request(fresh))
        await super().shutdown(sockets)  # waits for every connection it knows, the spared ones too
        await spared


def _not_yet() -> None:
    """A spared connection's shutdown while it waits for its first request."""


async def _close_after_first_request(connections: list) -> None:
    """Each connection's own shutdown once its first request has begun (answered, then closed), or at the grace's
    end (closed; one that its client has closed meanwhile takes it as a no-op)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FIRST_REQUEST_GRACE
    while connections:
        await asyncio.sleep(0.01)
        begun = [c for c in connections if c.cycle is not None or loop.time() >= deadline]
        for connection in begun:
            del connection.shutdown  # the class's own again
            connection.shutdown()
        connections = [c for c in connections if c not in begun]


def _listen(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        raise MtError(f"--host {host}: expected an IP address, e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (all)")
    # IPPROTO_TCP named: asyncio then sets TCP_NODELAY on each connection, so that an answer's header and body do
    # not wait for the client's delayed ACK on a kept-alive connection (docs/serving.md)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)  # connections wait in the backlog until uvicorn has started
    except OSError as e:
        sock.close()
        raise MtError(f"--host {host} --port {port}: cannot listen there ({e.strerror})")
    return sock


def read_api_keys(path) -> frozenset[str]:
    """One key per line; blank lines and lines starting with # are skipped."""
    from mt.core.lines import read_lines

    keys = frozenset(line.strip() for line in read_lines(path) if line.strip() and not line.startswith("#"))
    if not keys:
        raise MtError(f"{path}: no API keys in it (one per line)")
    return keys
