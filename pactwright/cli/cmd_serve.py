"""`pactwright serve --store URL [--ledger URL] [--host 127.0.0.1] [--port N]`: the runtime over HTTP.

Runs the ASGI application of `pactwright.service` under uvicorn until
SIGTERM or SIGINT, which finish the requests in hand and close every store
and ledger connection. With `--port 0` the system picks a free port; the
line `listening on http://HOST:PORT` on stdout says which, once the socket
is bound. The outbox is not delivered here: run `pactwright worker` beside
it. docs/api.md describes the endpoints.
"""

from __future__ import annotations

import argparse
import socket
import sys

from pactwright.cli._runtime_args import add_clock, add_store, clock
from pactwright.errors import UsageError


def register(parser: argparse.ArgumentParser) -> None:
    add_store(parser)
    parser.add_argument("--ledger", metavar="URL", help="the ledger database (default: the store's sibling)")
    parser.add_argument("--host", default="127.0.0.1", metavar="HOST", help="address to listen on (default loopback)")
    parser.add_argument("--port", type=int, default=8080, metavar="N", help="port to listen on (0: any free one)")
    parser.add_argument("--threads", type=int, default=8, metavar="N",
                        help="runtime calls in flight, and store connections held (default 8)")  # fmt: skip
    add_clock(parser)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: without it a response waits on Nagle's algorithm and the
        # client's delayed ACK, about 40 ms per request on loopback.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on `{host}:{port}`: {exc.strerror or exc}", field="port") from None
    return sock


def _server_class() -> type:
    import contextlib
    import signal
    from collections.abc import Iterator

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, stopped by SIGTERM or SIGINT like the other long-running commands: the requests
        in hand finish, the connections close, and the command exits 0 (uvicorn would re-raise the signal)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            def stop(signum: int, frame: object) -> None:
                self.should_exit = True

            previous = {number: signal.signal(number, stop) for number in (signal.SIGTERM, signal.SIGINT)}
            try:
                yield
            finally:
                for number, handler in previous.items():
                    signal.signal(number, handler)

    return Server


def run(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from pactwright.service import create_app

    _Server = _server_class()  # noqa: N806 - a class

    if not 0 <= args.port <= 65535:
        raise UsageError(f"port must be between 0 and 65535, not `{args.port}`")
    if not 1 <= args.threads <= 256:
        raise UsageError(f"--threads must be between 1 and 256, not `{args.threads}`")
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(args.store, args.ledger, clock=clock(args), threads=args.threads)
    sock = _listen(args.host, args.port)
    bound = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", log_config=None)
    server = _Server(config)
    sys.stdout.write(f"listening on http://{shown}:{bound}\n")
    sys.stdout.flush()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0
