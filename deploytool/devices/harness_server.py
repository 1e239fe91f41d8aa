"""The local HTTP server the browser harness page talks to: it serves the page,
the JS libraries' dist files and one run's model and data as raw bytes, with
explicit MIME types and the cross-origin isolation headers that let wasm run
multi-threaded with fine timers, and it accepts the page's POST of binary
results. It binds 127.0.0.1 on a free port and serves nothing outside the
roots it was given: no directory listings, no `..`, no absolute paths, no
symlink that leads out of a root, no dotfiles. It must never bind another
interface or serve the working directory.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Mapping
from urllib.parse import unquote, urlsplit

LOOPBACK = "127.0.0.1"
RESULTS_PREFIX = "/results/"

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
    "Cache-Control": "no-store",
}

_RESULT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class _Route:
    prefix: str  # "/lib/tfjs/" for a directory, "/index.html" for one file
    target: Path  # resolved at construction, so a later symlink swap cannot widen it
    is_dir: bool


class Refused(Exception):
    """A request path that points outside the roots (traversal, absolute, symlink)."""


class HarnessServer:
    """Serve `routes` on 127.0.0.1:<free port> until `stop()`.

    `routes` maps a URL prefix ending in "/" to a directory, or an exact URL
    path to one file. POSTs to /results/<name> are kept in memory (up to
    `max_post_bytes` each) for `take_result(name)`.
    """

    def __init__(self, routes: Mapping[str, Path], max_post_bytes: int = 1 << 30):
        self._routes: list[_Route] = []
        for prefix, target in routes.items():
            if not prefix.startswith("/"):
                raise ValueError(f"route {prefix!r} must start with '/'")
            real = Path(os.path.realpath(target))
            is_dir = prefix.endswith("/")
            if is_dir and not real.is_dir():
                raise FileNotFoundError(f"route {prefix} -> {target}: not a directory")
            if not is_dir and not real.is_file():
                raise FileNotFoundError(f"route {prefix} -> {target}: not a file")
            self._routes.append(_Route(prefix, real, is_dir))
        # Longest prefix first, so /lib/tfjs-tflite/ wins over a shorter match.
        self._routes.sort(key=lambda r: len(r.prefix), reverse=True)
        self.max_post_bytes = max_post_bytes
        self._results: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests_refused = 0

    # life cycle
    def start(self) -> "HarnessServer":
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer((LOOPBACK, 0), handler)
        self._httpd.daemon_threads = True
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
    def origin(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    # results posted by the page
    def _store_result(self, name: str, body: bytes) -> None:
        with self._lock:
            self._results[name] = body

    def take_result(self, name: str) -> bytes | None:
        with self._lock:
            return self._results.pop(name, None)

    def clear_results(self) -> None:
        with self._lock:
            self._results.clear()

    # path resolution
    def resolve(self, url_path: str) -> Path | None:
        """The file a URL path maps to; None when no route has it.

        Raises `Refused` for anything that would leave a root.
        """
        path = unquote(urlsplit(url_path).path)
        if "\x00" in path or "\\" in path or not path.startswith("/"):
            raise Refused(url_path)
        segments = path.split("/")[1:]
        # Rejected before any route matching: a browser never sends these, so a
        # request that has them is probing.
        if any(s in ("..", ".") for s in segments):
            raise Refused(url_path)
        for route in self._routes:
            if not route.is_dir:
                if path == route.prefix:
                    return route.target
                continue
            if not path.startswith(route.prefix):
                continue
            rest = path[len(route.prefix):]
            if not rest or rest.startswith("/") or "//" in rest:
                raise Refused(url_path)
            if any(s.startswith(".") for s in rest.split("/")):
                raise Refused(url_path)
            candidate = Path(os.path.realpath(route.target / rest))
            # realpath follows symlinks: a link inside the root that points out
            # of it lands here and is refused.
            if candidate != route.target and route.target not in candidate.parents:
                raise Refused(url_path)
            return candidate if candidate.is_file() else None
        return None


def _make_handler(server: HarnessServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: a TF.js model is many small files
        server_version = "deploytool-harness"
        sys_version = ""

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # the page's requests are not the user's business

        def _send_empty(self, status: HTTPStatus, close: bool = False) -> None:
            self.send_response(status)
            for k, v in ISOLATION_HEADERS.items():
                self.send_header(k, v)
            self.send_header("Content-Length", "0")
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()

        def _serve(self, with_body: bool) -> None:
            if self.path.startswith(RESULTS_PREFIX):
                self._send_empty(HTTPStatus.METHOD_NOT_ALLOWED)
                return
            try:
                file = server.resolve(self.path)
            except Refused:
                server.requests_refused += 1
                self._send_empty(HTTPStatus.FORBIDDEN)
                return
            if file is None:
                self._send_empty(HTTPStatus.NOT_FOUND)
                return
            try:
                fh = open(file, "rb")
            except OSError:
                self._send_empty(HTTPStatus.NOT_FOUND)
                return
            with fh:
                size = os.fstat(fh.fileno()).st_size
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", MIME_TYPES.get(file.suffix.lower(), DEFAULT_MIME))
                self.send_header("Content-Length", str(size))
                for k, v in ISOLATION_HEADERS.items():
                    self.send_header(k, v)
                self.end_headers()
                if with_body and size:
                    self.connection.sendfile(fh)

        def do_GET(self) -> None:  # noqa: N802
            self._serve(with_body=True)

        def do_HEAD(self) -> None:  # noqa: N802
            self._serve(with_body=False)

        def do_POST(self) -> None:  # noqa: N802
            path = urlsplit(self.path).path
            name = path[len(RESULTS_PREFIX):] if path.startswith(RESULTS_PREFIX) else ""
            if not _RESULT_NAME.match(name):
                server.requests_refused += 1
                self._send_empty(HTTPStatus.FORBIDDEN, close=True)
                return
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self._send_empty(HTTPStatus.LENGTH_REQUIRED, close=True)
                return
            if length < 0 or length > server.max_post_bytes:
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
            server._store_result(name, b"".join(chunks))
            self._send_empty(HTTPStatus.NO_CONTENT)

        def _refuse_method(self) -> None:
            self._send_empty(HTTPStatus.METHOD_NOT_ALLOWED, close=True)

        do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method  # noqa: N815

    return Handler


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
