"""Real HTTP and HTTPS servers on loopback for tests, with a throwaway CA.

``LoopbackServer`` is a ``ThreadingHTTPServer`` on ``127.0.0.1`` (port 0) that
runs in a background thread and serves routes a test registers while it runs:
fixed bodies, chunked bodies, slow streams, redirects and a Cloudflare-style
browser challenge. Routes can be replaced between requests from the test
thread. Every request is recorded (its target, and in ``received`` its method,
headers and body), and the bytes of body written per path are counted, so a
test can show that a client stopped reading early. ``close()`` stops the
server, cuts open connections and joins every handler thread; it is safe to
call twice.

``ThrowawayCA`` is a ``trustme`` CA with its PEM written to a file and one
server certificate for ``localhost``, ``127.0.0.1`` and ``::1``.

Handlers are silent: nothing is logged to stderr.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import trustme

__all__ = ["LoopbackServer", "ReceivedRequest", "ThrowawayCA"]

# Bound on a silent connection or a stalled handshake, so no handler thread
# can outlive a test for long even if a client misbehaves.
_CONNECTION_TIMEOUT_SECONDS = 10.0
# Bodies are written in pieces so progress can be counted and a client that
# stops reading is noticed before the whole body is pushed into the kernel.
_WRITE_PIECE_BYTES = 64 * 1024
_POLL_SECONDS = 0.01  # how soon close() is noticed
_DEFAULT_CONTENT_TYPE = "text/javascript"
_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding"})
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Request bodies a test may send; a larger one is refused with 413.
_MAX_REQUEST_BODY_BYTES = 16 * 1024 * 1024
_CHALLENGE_BODY = b"<!DOCTYPE html><title>Just a moment...</title>\n"


class ThrowawayCA:
    """A certificate authority that exists only for this test run.

    ``ca_file`` is the CA certificate as PEM, for ``ca_bundle=`` or
    ``SSL_CERT_FILE``. ``server_context()`` is what ``LoopbackServer`` uses;
    ``client_context()`` is a verifying client context that trusts the CA.
    """

    def __init__(self, directory: Path) -> None:
        self._ca = trustme.CA()
        self.ca_file: Path = directory / "ca.pem"
        self._ca.cert_pem.write_to_path(str(self.ca_file))
        self._leaf = self._ca.issue_cert("localhost", "127.0.0.1", "::1")

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._leaf.configure_cert(context)
        return context

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self._ca.configure_trust(context)
        return context


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the server read it: ``headers`` in wire order, names as sent."""

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), or None."""
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)


@dataclass(frozen=True)
class _Route:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes = b""
    # None: one body with Content-Length. Otherwise the pieces to stream.
    chunks: tuple[bytes, ...] | None = None
    # With chunks: use chunked transfer encoding, or a Content-Length and raw pieces.
    chunked: bool = True
    delay_seconds: float = 0.0
    # When set: a request whose User-Agent contains it gets a challenge instead.
    challenge_marker: str | None = None


class LoopbackServer:
    """An HTTP server on 127.0.0.1, or HTTPS when given a server TLS context.

    Register routes with ``serve``, ``serve_chunked``, ``serve_slow`` and
    ``redirect`` (and ``serve_challenge``); a route is matched by the request
    path without its query, whatever the method. Unknown paths answer 404.
    ``HEAD`` gets the headers only; ``GET``, ``POST``, ``PUT``, ``PATCH``,
    ``DELETE`` and ``OPTIONS`` get the route's answer, and a request body
    (Content-Length or chunked) is read and recorded first. Use as a context
    manager or call ``close()``.
    """

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.scheme = "https" if tls is not None else "http"
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._closing = threading.Event()
        self._routes: dict[str, _Route] = {}
        self._requests: list[str] = []
        self._received: list[ReceivedRequest] = []
        self._sent: dict[str, int] = {}
        self._connections: set[_Live] = set()
        self._closed = False
        self._httpd = _Server(self, tls)
        self.host = "127.0.0.1"
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": _POLL_SECONDS},
            name=f"loopback-{self.scheme}-{self.port}",
            daemon=True,
        )
        self._thread.start()

    # -- what tests call -------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` (which must start with ``/``) on this server."""
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        return self.base_url + path

    def serve(
        self,
        path: str,
        body: bytes,
        *,
        content_type: str | None = _DEFAULT_CONTENT_TYPE,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer ``path`` with ``body`` and a Content-Length; replaces any route there.

        ``content_type=None`` sends no Content-Type header at all.
        """
        self._add(path, _Route(status, _headers(content_type, headers), body=body))

    def serve_chunked(
        self,
        path: str,
        body: bytes,
        *,
        content_type: str | None = _DEFAULT_CONTENT_TYPE,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        chunk_size: int = _WRITE_PIECE_BYTES,
    ) -> None:
        """Answer ``path`` with ``body`` in chunked transfer encoding, no Content-Length."""
        if chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        view = memoryview(body)
        chunks = tuple(bytes(view[i : i + chunk_size]) for i in range(0, len(body), chunk_size))
        self._add(path, _Route(status, _headers(content_type, headers), chunks=chunks))

    def serve_slow(
        self,
        path: str,
        chunks: Sequence[bytes],
        delay_seconds: float,
        *,
        content_type: str | None = _DEFAULT_CONTENT_TYPE,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        declare_length: bool = False,
    ) -> None:
        """Answer ``path`` by sending the headers at once, then each chunk after a sleep.

        Chunked transfer encoding with no Content-Length, unless
        ``declare_length``: then a truthful Content-Length and the raw bytes.
        Sleeps end early when the server closes.
        """
        if delay_seconds < 0:
            raise ValueError("delay_seconds must not be negative")
        route = _Route(
            status,
            _headers(content_type, headers),
            chunks=tuple(chunks),
            chunked=not declare_length,
            delay_seconds=delay_seconds,
        )
        self._add(path, route)

    def serve_challenge(
        self,
        path: str,
        body: bytes,
        *,
        content_type: str | None = _DEFAULT_CONTENT_TYPE,
        browser_marker: str = "Mozilla/",
    ) -> None:
        """Answer ``path`` like a site behind a Cloudflare browser challenge.

        A request whose User-Agent contains ``browser_marker`` gets ``403`` with
        ``cf-mitigated: challenge`` and an HTML page; any other request gets
        ``body`` with status 200. ``browser_marker=""`` challenges everyone.
        """
        headers = _headers(content_type, None)
        self._add(path, _Route(200, headers, body=body, challenge_marker=browser_marker))

    def redirect(self, path: str, to_url: str, status: int = 302) -> None:
        """Answer ``path`` with a redirect whose Location is exactly ``to_url``."""
        if status not in _REDIRECT_STATUSES:
            raise ValueError(f"not a redirect status: {status}")
        self._add(path, _Route(status, (("Location", to_url),)))

    def remove(self, path: str) -> None:
        """Forget the route at ``path``; it answers 404 again."""
        with self._lock:
            self._routes.pop(path, None)

    @property
    def requests(self) -> list[str]:
        """The request targets received so far (path and query), oldest first. A copy."""
        with self._lock:
            return list(self._requests)

    @property
    def received(self) -> list[ReceivedRequest]:
        """Every request received so far, with method, headers and body, oldest first. A copy."""
        with self._lock:
            return list(self._received)

    def body_bytes_sent(self, path: str) -> int:
        """Body bytes written for ``path`` so far, over all requests (framing excluded)."""
        with self._lock:
            return self._sent.get(path, 0)

    def wait_idle(self, timeout: float = 5.0) -> None:
        """Wait until no connection is open, e.g. before reading ``body_bytes_sent``."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._connections:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("the server still has open connections")
                self._idle.wait(remaining)

    def close(self) -> None:
        """Stop serving, cut open connections and join every thread. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._closing.set()
        self._httpd.shutdown()
        self._thread.join()
        with self._lock:
            for connection in self._connections:
                if connection.sock is None:
                    continue
                # The plain socket method: on an SSLSocket it cuts the TCP
                # stream under the handler without touching the TLS state.
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(connection.sock, socket.SHUT_RDWR)
        self._httpd.server_close()  # also joins the handler threads

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- used by the server thread ----------------------------------------

    def _add(self, path: str, route: _Route) -> None:
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        with self._lock:
            self._routes[path] = route

    def _route_for(self, received: ReceivedRequest) -> tuple[str, _Route | None]:
        path = urllib.parse.urlsplit(received.target).path
        with self._lock:
            self._requests.append(received.target)
            self._received.append(received)
            return path, self._routes.get(path)

    def _count(self, path: str, sent: int) -> None:
        with self._lock:
            self._sent[path] = self._sent.get(path, 0) + sent

    @contextlib.contextmanager
    def _tracked(self, connection: _Live) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise ConnectionAbortedError("server is closing")
            self._connections.add(connection)
        try:
            yield
        finally:
            with self._idle:
                self._connections.discard(connection)
                self._idle.notify_all()

    def _sleep(self, seconds: float) -> bool:
        """Sleep; False if the server started closing meanwhile."""
        return not self._closing.wait(seconds)


class _Live:
    """An open connection's current socket; swapped for its TLS wrapper, None once closed."""

    __slots__ = ("sock",)

    def __init__(self, sock: socket.socket) -> None:
        self.sock: socket.socket | None = sock


def _headers(
    content_type: str | None, extra: Mapping[str, str] | None
) -> tuple[tuple[str, str], ...]:
    extra = dict(extra or {})
    if any(name.lower() in _FRAMING_HEADERS for name in extra):
        raise ValueError("the server sets Content-Length and Transfer-Encoding itself")
    if content_type is not None and not any(name.lower() == "content-type" for name in extra):
        extra["Content-Type"] = content_type
    return tuple(extra.items())


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: LoopbackServer, tls: ssl.SSLContext | None) -> None:
        self.owner = owner
        self._tls = tls
        super().__init__(("127.0.0.1", 0), _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # Runs in the connection's own thread, so a slow TLS handshake never
        # blocks accepting other connections.
        raw: socket.socket = request
        raw.settimeout(_CONNECTION_TIMEOUT_SECONDS)
        # Headers and body go out in separate writes; without this, Nagle and
        # the client's delayed ACK add ~40 ms to every response.
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        live = _Live(raw)
        with self.owner._tracked(live):
            if self._tls is None:
                _Handler(raw, client_address, self)
                return
            # wrap_socket takes over the descriptor, so the wrapper is ours to close.
            wrapped = self._tls.wrap_socket(raw, server_side=True)
            try:
                with self.owner._lock:
                    live.sock = wrapped
                _Handler(wrapped, client_address, self)
            finally:
                with self.owner._lock:
                    live.sock = None
                    wrapped.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Failed handshakes and clients that hang up are expected in tests.
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def do_POST(self) -> None:
        self._respond(send_body=True)

    do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _respond(self, *, send_body: bool) -> None:
        owner = self.server.owner
        try:
            body = self._read_request_body()
        except (OSError, ValueError):
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.send_error(400)
            return
        if body is None:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.send_error(413)
            return
        received = ReceivedRequest(self.command, self.path, tuple(self.headers.items()), body)
        path, route = owner._route_for(received)
        if route is None:
            route = _Route(404, (("Content-Type", "text/plain"),), body=b"not found\n")
        elif route.challenge_marker is not None and route.challenge_marker in (
            received.header("User-Agent") or ""
        ):
            route = _Route(
                403,
                (("Content-Type", "text/html"), ("cf-mitigated", "challenge")),
                body=_CHALLENGE_BODY,
            )
        try:
            self._send(owner, path, route, send_body)
        except OSError:
            # The client went away (or the server is closing): stop quietly.
            self.close_connection = True

    def _read_request_body(self) -> bytes | None:
        """The request body (empty if none); None when it is over the limit."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body = bytearray()
            while True:
                size = int(self.rfile.readline(100).split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(1000).strip():
                        pass  # trailers
                    return bytes(body)
                if len(body) + size > _MAX_REQUEST_BODY_BYTES:
                    return None
                body += self.rfile.read(size)
                self.rfile.readline(10)
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0:
            raise ValueError("negative Content-Length")
        if length > _MAX_REQUEST_BODY_BYTES:
            return None
        return self.rfile.read(length)

    def _send(self, owner: LoopbackServer, path: str, route: _Route, send_body: bool) -> None:
        self.send_response(route.status)
        for name, value in route.headers:
            self.send_header(name, value)
        chunked = route.chunks is not None and route.chunked
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            length = len(route.body) if route.chunks is None else sum(map(len, route.chunks))
            self.send_header("Content-Length", str(length))
        self.end_headers()
        if not send_body:
            return
        if route.chunks is None:
            view = memoryview(route.body)
            for start in range(0, len(view), _WRITE_PIECE_BYTES):
                piece = view[start : start + _WRITE_PIECE_BYTES]
                self.wfile.write(piece)
                owner._count(path, len(piece))
            return
        for chunk in route.chunks:
            if route.delay_seconds and not owner._sleep(route.delay_seconds):
                self.close_connection = True
                return
            if not chunk:
                continue  # an empty chunk would end a chunked body early
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            owner._count(path, len(chunk))
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
