"""The harness server against a hostile local client, with real sockets (the
server is pure stdlib, so no browser is needed here): over-long and
unresolvable paths, clients that hang up mid-response, and requests whose Host
or Origin is not the server's own (DNS rebinding, cross-site POSTs). After
each abuse the server must still answer the next request, and print nothing.
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time

import pytest

from deploytool.devices.harness_server import HarnessServer

# The server's limit (its MAX_REQUEST_LINE_BYTES), written out so that this file
# also runs against the server from before the limit, and fails there.
MAX_REQUEST_LINE_BYTES = 8 * 1024
BIG_FILE_BYTES = 64 << 20  # far more than loopback socket buffers hold
SMALL_BODY = b"\x01\x02\x03"


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "small.bin").write_bytes(SMALL_BODY)
    with open(root / "big.bin", "wb") as f:
        f.truncate(BIG_FILE_BYTES)  # sparse: costs no disk, sendfile still sends every byte
    with HarnessServer({"/data/": root}) as srv:
        yield srv


def _request(srv, method, path, headers=None, body=None, host=True):
    """(status, body) for one request; headers are sent exactly as given."""
    port = srv.address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host:
            conn.putheader("Host", f"127.0.0.1:{port}")
        for k, v in (headers or []):
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def _post(srv, name, body=b"\x00" * 16, headers=None):
    return _request(srv, "POST", f"/results/{name}", headers=headers, body=body)[0]


def _serves(srv) -> bool:
    return _request(srv, "GET", "/data/small.bin") == (200, SMALL_BODY)


def _wait_for_handlers(before: set[threading.Thread], timeout_s: float = 20) -> None:
    """Wait until every thread started after `before` (the request handlers) has ended,
    so whatever they would print has been printed."""
    deadline = time.monotonic() + timeout_s
    while any(t.is_alive() for t in threading.enumerate() if t not in before):
        assert time.monotonic() < deadline, "a request handler thread never ended"
        time.sleep(0.02)


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset, like a killed tab or a crashed client."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


# 1. request lines and paths ------------------------------------------------

@pytest.mark.parametrize("path_bytes", [MAX_REQUEST_LINE_BYTES + 1, 100 * 1024])
def test_over_long_request_line_is_414_and_the_next_request_is_served(server, path_bytes, capfd):
    long_path = "/data/" + "a" * path_bytes
    assert _request(server, "GET", long_path)[0] == 414
    assert _request(server, "POST", "/results/" + "a" * path_bytes, body=b"x",
                    headers=[("Origin", server.origin)])[0] == 414
    assert _serves(server)
    assert capfd.readouterr().err == ""


def test_path_that_cannot_be_resolved_is_404_not_a_traceback(server, capfd):
    before = set(threading.enumerate())
    unresolvable = [
        "/data/" + "a" * 300,  # one name longer than NAME_MAX (255)
        "/data/" + "/".join(["b" * 200] * 30),  # under 8 KiB, but longer than PATH_MAX (4096)
    ]
    for path in unresolvable:
        assert _request(server, "GET", path)[0] == 404, path
        assert server.resolve(path) is None
    assert _serves(server)
    _wait_for_handlers(before)
    assert capfd.readouterr().err == ""


# 2. clients that hang up ---------------------------------------------------

def test_client_hanging_up_mid_file_prints_nothing_and_server_goes_on(server, capfd):
    before = set(threading.enumerate())
    port = server.address[1]
    for _ in range(3):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.settimeout(10)
        sock.sendall(f"GET /data/big.bin HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        got = b""
        while len(got) < 64 * 1024:  # the file is well under way
            chunk = sock.recv(16384)
            assert chunk, "the server closed before sending the file"
            got += chunk
        assert got.startswith(b"HTTP/1.1 200 ")
        assert f"Content-Length: {BIG_FILE_BYTES}".encode() in got
        _reset(sock)
    assert _serves(server)
    _wait_for_handlers(before)
    assert capfd.readouterr().err == ""


def test_client_hanging_up_before_the_response_prints_nothing(server, capfd):
    before = set(threading.enumerate())
    port = server.address[1]
    partial = [
        b"GET /data/sm",  # mid request line
        f"GET /data/small.bin HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode(),  # mid headers
        (f"POST /results/outputs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
         f"Origin: http://127.0.0.1:{port}\r\nContent-Length: 1000000\r\n\r\n").encode() + b"\x00" * 1000,
    ]
    for data in partial:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(data)
        time.sleep(0.1)  # the handler is now blocked reading the rest
        _reset(sock)
    assert _serves(server)
    _wait_for_handlers(before)
    assert capfd.readouterr().err == ""
    assert server.take_result("outputs") is None


# 3. Host and Origin ----------------------------------------------------------

def test_foreign_host_is_400_on_get_and_post(server):
    port = server.address[1]
    foreign_hosts = [
        [("Host", "evil.example")],  # DNS rebinding: the browser names the attacker's host
        [("Host", f"evil.example:{port}")],
        [("Host", f"localhost:{port}")],  # the page never uses this name
        [("Host", "127.0.0.1")],  # no port
        [("Host", f"127.0.0.1:{port + 1}")],
        [("Host", f"127.0.0.1:{port}"), ("Host", "evil.example")],  # two Hosts
        [],  # none
    ]
    for hosts in foreign_hosts:
        assert _request(server, "GET", "/data/small.bin", headers=hosts, host=False)[0] == 400, hosts
        assert _request(server, "HEAD", "/data/small.bin", headers=hosts, host=False)[0] == 400, hosts
        status, _ = _request(server, "POST", "/results/outputs", body=b"\x00" * 16, host=False,
                             headers=[*hosts, ("Origin", server.origin)])
        assert status == 400, hosts
    assert server.take_result("outputs") is None
    assert server.requests_refused == 3 * len(foreign_hosts)
    assert _serves(server)


def test_absolute_form_request_target_is_400(server):
    # It names its own authority, which overrides Host; a browser never sends it to a server.
    for target in ("http://evil.example/data/small.bin", f"http://{server.address[0]}/data/small.bin", "*"):
        assert _request(server, "GET", target)[0] == 400, target


def test_post_needs_exactly_our_origin(server):
    port = server.address[1]
    bad_origins = [
        [("Origin", "http://evil.example")],
        [("Origin", f"http://evil.example:{port}")],
        [("Origin", f"http://localhost:{port}")],
        [("Origin", f"https://127.0.0.1:{port}")],
        [("Origin", server.origin + "/")],
        [("Origin", "null")],  # sandboxed frames, file: pages
        [("Origin", server.origin), ("Origin", "http://evil.example")],
        [],  # Chromium sends Origin on every POST, its same-origin fetch too
    ]
    for origin in bad_origins:
        assert _post(server, "outputs", headers=origin) == 400, origin
    assert server.take_result("outputs") is None
    assert server.requests_refused == len(bad_origins)

    # The page's own POST still works, and a GET needs no Origin.
    assert _post(server, "outputs", b"\x07" * 1000, headers=[("Origin", server.origin)]) == 204
    assert server.take_result("outputs") == b"\x07" * 1000
    assert _serves(server)


def _send_slowly_and_read(port: int, pieces: list[bytes]) -> bytes:
    """Send `pieces` with pauses between them, like an upload on a slow link,
    then read the answer up to the server's EOF."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        for piece in pieces:
            sock.sendall(piece)
            time.sleep(0.2)  # the server has long answered the part it read
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def test_refusal_reaches_a_client_still_sending_its_request(server, capfd):
    # The server answers before it has read the whole request. Had it closed
    # then, the bytes still coming would reset the connection under the
    # client's feet: a failed send instead of the answer.
    port = server.address[1]
    host = f"Host: 127.0.0.1:{port}\r\n".encode()
    line_over_stdlib_limit = [b"GET /data/" + b"a" * 70_000, b"a" * 30_000, b" HTTP/1.1\r\n" + host + b"\r\n"]
    reply = _send_slowly_and_read(port, line_over_stdlib_limit)
    assert reply.startswith(b"HTTP/1.1 414 ")
    chunk = b"\x00" * 100_000
    foreign_post = [b"POST /results/outputs HTTP/1.1\r\n" + host
                    + b"Origin: http://evil.example\r\nContent-Length: 300000\r\n\r\n", chunk, chunk, chunk]
    reply = _send_slowly_and_read(port, foreign_post)
    assert reply.startswith(b"HTTP/1.1 400 ")
    assert server.take_result("outputs") is None
    assert _serves(server)
    assert capfd.readouterr().err == ""


# 5. what comes and goes: a row's model routes and its inputs in memory --------

def test_a_blob_is_served_from_memory_until_dropped(server):
    import numpy as np

    data = np.arange(1000, dtype=np.float32)
    server.put_blob("/data/row1/inputs.bin", data)
    status, body = _request(server, "GET", "/data/row1/inputs.bin")
    assert status == 200 and body == data.tobytes()
    assert _request(server, "HEAD", "/data/row1/inputs.bin")[0] == 200
    server.drop_blob("/data/row1/inputs.bin")
    assert _request(server, "GET", "/data/row1/inputs.bin")[0] == 404
    assert _serves(server)


@pytest.mark.parametrize("path", ["/../etc/passwd", "relative", "/a/../b", "/.hidden", "/a//b", "/a/b/c/d/e"])
def test_a_blob_path_that_could_look_like_traversal_is_refused(server, path):
    with pytest.raises(ValueError):
        server.put_blob(path, b"x")


def test_routes_mount_and_unmount(server, tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "model.json").write_text("{}")
    server.mount({"/model/abc/": model})
    assert _request(server, "GET", "/model/abc/model.json") == (200, b"{}")
    assert _request(server, "GET", "/model/abc/../m/model.json")[0] == 403
    server.unmount(["/model/abc/"])
    assert _request(server, "GET", "/model/abc/model.json")[0] == 404
    assert _serves(server)


def _headers(srv, path, extra=None):
    port = srv.address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}", **(extra or {})})
        r = conn.getresponse()
        r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


def test_library_routes_are_cacheable_with_an_etag_and_rows_files_never(server, tmp_path):
    """Issue 25: the libraries may stay in the browser's cache (max-age, ETag, 304); a row's model, its
    inputs and every refusal are no-store, so no row ever runs another row's (or an older) model."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "ort.wasm").write_bytes(b"\x00asm")
    model = tmp_path / "model.onnx"
    model.write_bytes(b"onnx")
    server.mount({"/lib/ort/": lib}, cache=True)
    server.mount({"/model/r1/model.onnx": model})
    server.put_blob("/data/r1/inputs.bin", b"1234")

    status, h = _headers(server, "/lib/ort/ort.wasm")
    assert status == 200 and "max-age=" in h["cache-control"] and "no-store" not in h["cache-control"]
    assert h["content-type"] == "application/wasm" and h["etag"].startswith('"')
    assert h["cross-origin-resource-policy"] == "same-origin"  # still loadable under COEP require-corp
    status, h304 = _headers(server, "/lib/ort/ort.wasm", {"If-None-Match": f'W/{h["etag"]}, "other"'})
    assert status == 304 and h304["etag"] == h["etag"]
    (lib / "ort.wasm").write_bytes(b"\x00asm\x01")  # a changed file is a new entity
    assert _headers(server, "/lib/ort/ort.wasm", {"If-None-Match": h["etag"]})[0] == 200
    assert server.requests_served["/lib/ort/ort.wasm"] == 3

    for path in ("/model/r1/model.onnx", "/data/r1/inputs.bin", "/data/small.bin", "/lib/ort/missing.wasm"):
        status, h = _headers(server, path, {"If-None-Match": "*"})
        assert status in (200, 404) and h["cache-control"] == "no-store" and "etag" not in h, path
