"""The local HTTP server the browser harness page talks to: it serves the page,
the JS libraries' dist files, each row's model (routes mounted and unmounted
while it runs) and its inputs straight from memory (blobs), with
explicit MIME types and the cross-origin isolation headers that let wasm run
multi-threaded with fine timers, and it accepts the page's POST of binary
results. It binds 127.0.0.1 on a free port and serves nothing outside the
roots it was given and the blobs put into it: no directory listings, no `..`, no absolute paths, no
symlink that leads out of a root, no dotfiles. It answers only requests
addressed to itself (Host 127.0.0.1:<port>; a POST also needs Origin
http://127.0.0.1:<port>, which Chromium sends), so a page of another site that
rebinds its DNS name to 127.0.0.1 gets nothing. A hostile or departing client
(a path too long to resolve, a hang-up mid-file) gets a status code or silence,
never a traceback. It must never bind another interface or serve the working
directory.

Caching: a route mounted with `cache=True` (the page and the libraries' dist
files: they do not change while a run lasts) is sent with `Cache-Control:
private, max-age=...` and an ETag of the file (size, mtime, inode), and a
request that names that ETag in If-None-Match gets 304: a browser profile
shared by a run's rows then fetches and compiles tfjs and the wasm runtimes
once. Everything else — each row's model, its inputs, the results — is
`no-store`, so a row never sees another row's (or an earlier run's) model.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

from deploytool.value import value

LOOPBACK = "127.0.0.1"
RESULTS_PREFIX = "/results/"
# The page's longest URL is a model file under /lib/... or /model/..., far
# below this; the stdlib alone would read request lines up to 64 KiB.
MAX_REQUEST_LINE_BYTES = 8 * 1024
# After a refusal, what the client is still sending is read and dropped, up to
# this much for this long, before the socket is closed (see _drain).
LINGER_MAX_BYTES = 4 << 20
LINGER_S = 2.0

# Explicit, because mimetypes depends on the host's /etc/mime.types and a wasm
# file served as octet-stream cannot be compiled with streaming instantiation.
MIME_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".wasm": "application/wasm",
    ".css": "text/css; charset=utf-8",
    ".bin": "application/octet-stream",
    ".onnx": "application/octet-stream",
    ".tflite": "application/octet-stream",
}
DEFAULT_MIME = "application/octet-stream"

# Cross-origin isolation: without COOP+COEP there is no SharedArrayBuffer, so
# wasm runs single-threaded and performance.now() is coarsened to 0.1 ms.
ISOLATION_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}
NO_STORE = "no-store"
# For files of routes mounted with cache=True. A run's profile lives for one run; an hour is longer.
LIBRARY_MAX_AGE_S = 3600
CACHEABLE = f"private, max-age={LIBRARY_MAX_AGE_S}"

_RESULT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# A blob's URL path: plain segments only, so it can never look like a traversal.
_BLOB_PATH = re.compile(r"^(/[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}){1,4}$")


@value
class _Route:
    prefix: str  # "/lib/tfjs/" for a directory, "/index.html" for one file
    target: Path  # resolved at construction, so a later symlink swap cannot widen it
    is_dir: bool
    cache: bool = False  # its files may be kept by the browser (see CACHEABLE)


class Refused(Exception):
    """A request path that points outside the roots (traversal, absolute, symlink)."""


class HarnessServer:
    """Serve `routes` on 127.0.0.1:<free port> until `stop()`.

    `routes` maps a URL prefix ending in "/" to a directory, or an exact URL
    path to one file. POSTs to /results/<name> are kept in memory (up to
    `max_post_bytes` each) for `take_result(name)`.
    """

    def __init__(self, routes: Mapping[str, Path], max_post_bytes: int = 1 << 30, cache: bool = False):
        self._routes: list[_Route] = []
        self._lock = threading.Lock()
        self.mount(routes, cache=cache)
        self.max_post_bytes = max_post_bytes
        self._results: dict[str, bytes] = {}
        self._blobs: dict[str, memoryview] = {}
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        # Requests answered with 400/403/414 or another refusal: a browser
        # running the harness page never sends one, so a count above 0 means
        # something else talked to the server.
        self.requests_refused = 0
        # GETs answered, by URL path (200 and 304 alike): tests read which files the browser asked for again
        self.requests_served: dict[str, int] = {}

    # life cycle
    def start(self) -> "HarnessServer":
        self._httpd = _QuietHTTPServer((LOOPBACK, 0), _Handler, self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="harness-server",
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "HarnessServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        if self._httpd is None:
            raise RuntimeError("server is not started")
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    @property
    def authority(self) -> str:
        """The only Host header the server answers: "127.0.0.1:<port>"."""
        host, port = self.address
        return f"{host}:{port}"

    @property
    def origin(self) -> str:
        return f"http://{self.authority}"

    # routes and blobs that come and go (one row's model, one row's inputs)
    def mount(self, routes: Mapping[str, Path], cache: bool = False) -> None:
        """Add routes (a prefix ending in "/" -> a directory, an exact path -> a file); a prefix already
        served is replaced. `cache`: the browser may keep their files (never for a row's model or data)."""
        new = []
        for prefix, target in routes.items():
            if not prefix.startswith("/"):
                raise ValueError(f"route {prefix!r} must start with '/'")
            real = Path(os.path.realpath(target))
            is_dir = prefix.endswith("/")
            if is_dir and not real.is_dir():
                raise FileNotFoundError(f"route {prefix} -> {target}: not a directory")
            if not is_dir and not real.is_file():
                raise FileNotFoundError(f"route {prefix} -> {target}: not a file")
            new.append(_Route(prefix, real, is_dir, cache))
        with self._lock:
            kept = [r for r in self._routes if r.prefix not in {n.prefix for n in new}]
            # Longest prefix first, so /lib/tfjs-tflite/ wins over a shorter match.
            self._routes = sorted(kept + new, key=lambda r: len(r.prefix), reverse=True)

    def unmount(self, prefixes: "list[str] | tuple[str, ...]") -> None:
        with self._lock:
            self._routes = [r for r in self._routes if r.prefix not in set(prefixes)]

    def put_blob(self, url_path: str, data: "bytes | bytearray | memoryview") -> None:
        """Serve `data` at exactly `url_path` from memory (no copy: a C-contiguous array's buffer
        works) until `drop_blob`; the caller must not change it meanwhile."""
        if not _BLOB_PATH.match(url_path):
            raise ValueError(f"blob path {url_path!r} must be plain /segments")
        with self._lock:
            self._blobs[url_path] = memoryview(data).cast("B")

    def drop_blob(self, url_path: str) -> None:
        with self._lock:
            self._blobs.pop(url_path, None)

    def _blob(self, url_path: str) -> memoryview | None:
        with self._lock:
            return self._blobs.get(urlsplit(url_path).path)

    # results posted by the page
    def _store_result(self, name: str, body: bytes) -> None:
        with self._lock:
            self._results[name] = body

    def _count(self, url_path: str) -> None:
        path = urlsplit(url_path).path
        with self._lock:
            self.requests_served[path] = self.requests_served.get(path, 0) + 1

    def take_result(self, name: str) -> bytes | None:
        with self._lock:
            return self._results.pop(name, None)

    def clear_results(self) -> None:
        with self._lock:
            self._results.clear()

    # path resolution
    def resolve(self, url_path: str) -> Path | None:
        """The file a URL path maps to; None when no route has it, or when the
        file system cannot even look the path up (a name over NAME_MAX, a path
        over PATH_MAX).

        Raises `Refused` for anything that would leave a root.
        """
        found = self.resolve_route(url_path)
        return found[0] if found is not None else None

    def resolve_route(self, url_path: str) -> tuple[Path, bool] | None:
        """`resolve`, with whether the file's route may be cached."""
        path = unquote(urlsplit(url_path).path)
        if "\x00" in path or "\\" in path or not path.startswith("/"):
            raise Refused(url_path)
        segments = path.split("/")[1:]
        # Rejected before any route matching: a browser never sends these, so a
        # request that has them is probing.
        if any(s in ("..", ".") for s in segments):
            raise Refused(url_path)
        with self._lock:
            routes = list(self._routes)
        for route in routes:
            if not route.is_dir:
                if path == route.prefix:
                    return route.target, route.cache
                continue
            if not path.startswith(route.prefix):
                continue
            rest = path[len(route.prefix):]
            if not rest or rest.startswith("/") or "//" in rest:
                raise Refused(url_path)
            if any(s.startswith(".") for s in rest.split("/")):
                raise Refused(url_path)
            try:
                candidate = Path(os.path.realpath(route.target / rest))
                # realpath follows symlinks: a link inside the root that points
                # out of it lands here and is refused.
                if candidate != route.target and route.target not in candidate.parents:
                    raise Refused(url_path)
                return (candidate, route.cache) if candidate.is_file() else None
            except OSError:  # ENAMETOOLONG, ELOOP, EACCES...: nothing we can serve
                return None
        return None


def _etags(header: str) -> set[str]:
    """The entity tags an If-None-Match header names (weak ones compared as strong: our tags are exact)."""
    return {t.strip().removeprefix("W/") for t in header.split(",") if t.strip()}


def _drain(sock: socket.socket) -> None:
    """Half-close after a refusal, then read and drop the rest of the request.

    Closing a socket with unread input makes the kernel send a reset, and a
    client still sending its request (a 100 KiB request line, a POST body) then
    fails mid-send or loses the answer it has not read yet. Bounded in bytes
    and time, so a client that never stops sending cannot hold the thread.
    """
    try:
        sock.shutdown(socket.SHUT_WR)  # the answer is complete: the client reads EOF after it
        sock.settimeout(LINGER_S)
        deadline = time.monotonic() + LINGER_S
        left = LINGER_MAX_BYTES
        while left > 0 and time.monotonic() < deadline:
            chunk = sock.recv(min(left, 1 << 16))
            if not chunk:
                return
            left -= len(chunk)
    except OSError:  # reset, timeout: the client is gone either way
        pass


class _QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a client holding a connection open must not delay exit

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], harness: HarnessServer):
        self.harness = harness  # what the handler serves from and reports to
        super().__init__(address, handler)

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
        # A client that hangs up (a closed tab, the browser closed at teardown
        # while a model file was still streaming, a reset) is normal: the
        # stdlib would print its traceback on the user's terminal. Anything
        # else is a bug in this module and is still printed.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """One request to the harness server (its HarnessServer: `_h`): files of its routes and blobs, the page's
    results posted back; everything the page never sends refused."""

    server: "_QuietHTTPServer"

    @property
    def _h(self) -> HarnessServer:
        return self.server.harness

    protocol_version = "HTTP/1.1"  # keep-alive: a TF.js model is many small files
    server_version = "deploytool-harness"
    sys_version = ""
    _linger = False  # set when an answer ends the connection before the request was read
    raw_requestline: bytes  # set by the stdlib's handle_one_request (typeshed leaves it out)

    def log_message(self, format: str, *args: object) -> None:
        pass  # the page's requests are not the user's business

    def parse_request(self) -> bool:
        """The stdlib's parsing, then refuse what the harness page never sends."""
        if not super().parse_request():
            return False  # already answered, through send_error below
        if len(self.raw_requestline) > MAX_REQUEST_LINE_BYTES:
            return self._refuse(HTTPStatus.REQUEST_URI_TOO_LONG)
        # Absolute-form ("GET http://host/x") names its own host, which
        # would override the Host header checked next.
        if not self.path.startswith("/"):
            return self._refuse(HTTPStatus.BAD_REQUEST)
        # DNS rebinding: a page of evil.example whose name now resolves to
        # 127.0.0.1 reaches this port, but its browser still says
        # Host: evil.example. The page itself uses only 127.0.0.1:<port>.
        if self.headers.get_all("Host") != [self._h.authority]:
            return self._refuse(HTTPStatus.BAD_REQUEST)
        # A cross-site page may POST here without reading the answer; its
        # Origin gives it away. Chromium sends Origin on every POST, the
        # page's same-origin fetch too, so a missing one is refused as well.
        if self.command == "POST" and self.headers.get_all("Origin") != [self._h.origin]:
            return self._refuse(HTTPStatus.BAD_REQUEST)
        return True

    def _refuse(self, status: HTTPStatus) -> bool:
        self._h.requests_refused += 1
        self._send_empty(status, close=True)
        return False

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # The stdlib's own refusals (a request line over 64 KiB, bad syntax,
        # too many headers, an unknown method) answer like ours: no HTML
        # body, and the connection ends since its framing is in doubt.
        self._refuse(HTTPStatus(code))

    def _send_empty(self, status: HTTPStatus, close: bool = False) -> None:
        self.send_response(status)
        for k, v in ISOLATION_HEADERS.items():
            self.send_header(k, v)
        self.send_header("Cache-Control", NO_STORE)
        self.send_header("Content-Length", "0")
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
            self._linger = True
        self.end_headers()

    def finish(self) -> None:
        super().finish()  # flushes the answer
        if self._linger:
            _drain(self.connection)

    def _serve(self, with_body: bool) -> None:
        if self.path.startswith(RESULTS_PREFIX):
            self._send_empty(HTTPStatus.METHOD_NOT_ALLOWED)
            return
        blob = self._h._blob(self.path)
        if blob is not None:
            self._send_blob(blob, with_body)
            return
        try:
            found = self._h.resolve_route(self.path)
        except Refused:
            self._h.requests_refused += 1
            self._send_empty(HTTPStatus.FORBIDDEN)
            return
        if found is None:
            self._send_empty(HTTPStatus.NOT_FOUND)
            return
        file, cache = found
        try:
            fh = open(file, "rb")
        except OSError:
            self._send_empty(HTTPStatus.NOT_FOUND)
            return
        with fh:
            st = os.fstat(fh.fileno())
            size = st.st_size
            etag = f'"{st.st_size:x}-{st.st_mtime_ns:x}-{st.st_ino:x}"' if cache else None
            self._h._count(self.path)
            if etag is not None and etag in _etags(self.headers.get("If-None-Match", "")):
                self.send_response(HTTPStatus.NOT_MODIFIED)
                self._file_headers(file, etag)
                self.end_headers()
                return
            self.send_response(HTTPStatus.OK)
            self._file_headers(file, etag)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if with_body and size:
                self.connection.sendfile(fh)

    def _file_headers(self, file: Path, etag: str | None) -> None:
        self.send_header("Content-Type", MIME_TYPES.get(file.suffix.lower(), DEFAULT_MIME))
        for k, v in ISOLATION_HEADERS.items():
            self.send_header(k, v)
        if etag is None:
            self.send_header("Cache-Control", NO_STORE)
        else:
            self.send_header("Cache-Control", CACHEABLE)
            self.send_header("ETag", etag)

    def _send_blob(self, blob: memoryview, with_body: bool) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", DEFAULT_MIME)
        self.send_header("Content-Length", str(blob.nbytes))
        for k, v in ISOLATION_HEADERS.items():
            self.send_header(k, v)
        self.send_header("Cache-Control", NO_STORE)
        self.end_headers()
        if with_body and blob.nbytes:
            self.wfile.write(blob)  # straight from the array's memory: no file, no copy

    def do_GET(self) -> None:
        self._serve(with_body=True)

    def do_HEAD(self) -> None:
        self._serve(with_body=False)

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        name = path[len(RESULTS_PREFIX):] if path.startswith(RESULTS_PREFIX) else ""
        if not _RESULT_NAME.match(name):
            self._h.requests_refused += 1
            self._send_empty(HTTPStatus.FORBIDDEN, close=True)
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._send_empty(HTTPStatus.LENGTH_REQUIRED, close=True)
            return
        if length < 0 or length > self._h.max_post_bytes:
            self._send_empty(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, close=True)
            return
        chunks, left = [], length
        while left:
            chunk = self.rfile.read(min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left:
            self._send_empty(HTTPStatus.BAD_REQUEST, close=True)
            return
        self._h._store_result(name, b"".join(chunks))
        self._send_empty(HTTPStatus.NO_CONTENT)

    def _refuse_method(self) -> None:
        self._send_empty(HTTPStatus.METHOD_NOT_ALLOWED, close=True)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method


def library_routes(harness_dir: Path) -> dict[str, Path]:
    """URL routes for the harness page and the libraries' dist folders.

    Only dist folders are served, never node_modules as a whole.
    """
    nm = harness_dir / "node_modules"
    routes = {
        "/index.html": harness_dir / "index.html",
        "/harness.js": harness_dir / "harness.js",
        "/lib/tfjs/": nm / "@tensorflow" / "tfjs" / "dist",
        "/lib/tfjs-backend-wasm/": nm / "@tensorflow" / "tfjs-backend-wasm" / "dist",
        "/lib/tfjs-backend-webgpu/": nm / "@tensorflow" / "tfjs-backend-webgpu" / "dist",
        "/lib/tfjs-tflite/": nm / "@tensorflow" / "tfjs-tflite" / "dist",
        "/lib/onnxruntime-web/": nm / "onnxruntime-web" / "dist",
    }
    # tfjs-tflite loads its wasm runtime from beside its own script (with or
    # without setWasmPath, it looks there first): serve those files there.
    tflite_wasm = nm / "@tensorflow" / "tfjs-tflite" / "wasm"
    if tflite_wasm.is_dir():
        for f in sorted(tflite_wasm.iterdir()):
            if f.is_file() and f.suffix in (".js", ".wasm"):
                routes[f"/lib/tfjs-tflite/{f.name}"] = f
    return routes
