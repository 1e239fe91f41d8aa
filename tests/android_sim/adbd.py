"""`DeviceSimulator`: a TEST DOUBLE of an Android phone's adbd, for tests only.

No phone exists on the test machine, so this speaks the ADB *transport*
protocol (the one adbd speaks over USB/TCP) to the real `adb` server after
`adb connect 127.0.0.1:PORT`. Shell commands run under the host's /bin/sh in a
temporary folder that stands for the phone's /data/local/tmp; `getprop`
answers from a table; `toybox time -v` is emulated with the real rusage of the
child. It must never be used outside tests, never touch paths outside its
temporary folder through sync, and never bind anything but 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable


def _cmd(name: bytes) -> int:
    return struct.unpack("<I", name)[0]


A_CNXN, A_OPEN, A_OKAY = _cmd(b"CNXN"), _cmd(b"OPEN"), _cmd(b"OKAY")
A_CLSE, A_WRTE, A_AUTH = _cmd(b"CLSE"), _cmd(b"WRTE"), _cmd(b"AUTH")
A_VERSION = 0x01000001
MAX_PAYLOAD = 256 * 1024
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3

DEVICE_TMP = "/data/local/tmp"

# A phone-like property table. The model name says what it is, so nobody
# mistakes a simulator result for a measurement on a phone.
DEFAULT_PROPS = {
    "ro.product.model": "ADB simulator (deploytool test double)",
    "ro.product.manufacturer": "deploytool-tests",
    "ro.product.brand": "deploytool",
    "ro.product.name": "adbsim",
    "ro.product.device": "adbsim",
    "ro.board.platform": "simboard",
    "ro.soc.manufacturer": "Simulated",
    "ro.soc.model": "SIM8000",
    "ro.hardware": "adbsim",
    "ro.build.version.release": "14",
    "ro.build.version.sdk": "34",
    "ro.build.fingerprint": "deploytool/adbsim/adbsim:14/SIM.1/1:userdebug/test-keys",
    "ro.product.cpu.abi": "arm64-v8a",
    "ro.product.cpu.abilist": "arm64-v8a,armeabi-v7a,armeabi",
}

_GETPROP = r'''#!{python}
"""getprop TEST DOUBLE: answers from the simulator's property table."""
import json, sys
props = json.load(open({props!r}))
if len(sys.argv) > 1:
    print(props.get(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""))
else:
    for k in sorted(props):
        print("[%s]: [%s]" % (k, props[k]))
'''

# toybox's `time -v` prints these exact lines (toys/posix/time.c); the numbers
# come from the real rusage of the child process on the host.
_TOYBOX = r'''#!{python}
"""toybox TEST DOUBLE: `toybox time [-pv] CMD...` like toys/posix/time.c;
any other applet runs the host command of the same name."""
import os, sys, time
args = sys.argv[1:]
if not args:
    sys.exit("toybox: missing applet")
if args[0] != "time" or not {time_v!r}:
    if args[0] == "time":
        sys.stderr.write("toybox: Unknown command time\n"); sys.exit(127)
    os.execvp(args[0], args)
args = args[1:]
verbose = False
while args and args[0] in ("-v", "-p"):
    verbose = verbose or args[0] == "-v"; args = args[1:]
t0 = time.time()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(args[0], args)
    except OSError as e:
        sys.stderr.write("time: %s: %s\n" % (args[0], e.strerror)); os._exit(127)
_, status, ru = os.wait4(pid, 0)
r = time.time() - t0
if verbose:
    sys.stderr.write("Real time (s): %f\nSystem time (s): %f\nUser time (s): %f\n"
        "Max RSS (KiB): %d\nMajor faults: %d\nMinor faults: %d\n"
        "File system inputs: %d\nFile system outputs: %d\n"
        "Voluntary context switches: %d\nInvoluntary context switches: %d\n" % (
        r, ru.ru_stime, ru.ru_utime, ru.ru_maxrss, ru.ru_majflt, ru.ru_minflt,
        ru.ru_inblock, ru.ru_oublock, ru.ru_nvcsw, ru.ru_nivcsw))
else:
    sys.stderr.write("\nreal\t%f\nuser\t%f\nsys\t%f\n" % (r, ru.ru_utime, ru.ru_stime))
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else os.WTERMSIG(status))
'''

# toybox's `timeout` (toys/other/timeout.c): signals only its own child (not the
# child's children), exits 124 (137 after -k's KILL), and reports a child
# killed by signal N as 128+N. Host coreutils `timeout` differs on all three.
_TIMEOUT = r'''#!{python}
"""toybox timeout TEST DOUBLE: timeout [-k DURATION] [-s SIGNAL] DURATION COMMAND..."""
import os, signal, sys
args = sys.argv[1:]
k = None; sig = signal.SIGTERM; foreground = preserve = False
while args and args[0].startswith("-") and args[0] != "-":
    a = args.pop(0)
    if a == "-k": k = args.pop(0)
    elif a == "-s": sig = getattr(signal, "SIG" + args.pop(0).upper().removeprefix("SIG"))
    elif a == "--foreground": foreground = True
    elif a == "--preserve-status": preserve = True
    elif a == "-v": pass
    else: sys.stderr.write("timeout: bad option %s\n" % a); sys.exit(125)
def secs(s):
    mult = {"s": 1, "m": 60, "h": 3600, "d": 86400}.get(s[-1:], None)
    return float(s[:-1]) * mult if mult else float(s)
duration = secs(args.pop(0))
if not foreground:
    os.setpgid(0, 0)
pid = os.fork()
if pid == 0:
    try:
        os.execvp(args[0], args)
    except OSError as e:
        sys.stderr.write("timeout: %s: %s\n" % (args[0], e.strerror)); os._exit(127)
state = {"exit": 0, "next": sig, "k": k}
def handler(signum, frame):
    state["exit"] = 137 if state["next"] == signal.SIGKILL else 124
    try:
        os.kill(pid, state["next"])
    except ProcessLookupError:
        pass
    if state["k"]:
        signal.setitimer(signal.ITIMER_REAL, secs(state["k"]))
        state["k"] = None; state["next"] = signal.SIGKILL
signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, duration)
while True:
    try:
        _, status = os.waitpid(pid, 0)
        break
    except InterruptedError:
        continue
code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
sys.exit(code if preserve or not state["exit"] else state["exit"])
'''


class _Closed(Exception):
    pass


class _Stream:
    """One ADB stream: our local id, the server's id, an inbox, and the
    one-WRTE-in-flight rule (wait for the peer's OKAY before the next)."""

    def __init__(self, transport: "_Transport", local_id: int, remote_id: int):
        self.t = transport
        self.local_id = local_id
        self.remote_id = remote_id
        self._inbox = bytearray()
        self._cond = threading.Condition()
        self._acked = threading.Event()
        self._acked.set()
        self._write_lock = threading.Lock()
        self.closed = False
        self.on_peer_close: Callable[[], None] | None = None

    def feed(self, data: bytes) -> None:
        with self._cond:
            self._inbox += data
            self._cond.notify_all()

    def read_exact(self, n: int) -> bytes:
        with self._cond:
            while len(self._inbox) < n:
                if self.closed:
                    raise _Closed() from None
                self._cond.wait(0.5)
            out = bytes(self._inbox[:n])
            del self._inbox[:n]
            return out

    def write(self, data: bytes) -> None:
        with self._write_lock:
            for i in range(0, len(data), self.t.max_payload):
                while not self._acked.wait(0.5):
                    if self.closed or self.t.dead:
                        raise _Closed() from None
                if self.closed:
                    raise _Closed() from None
                self._acked.clear()
                self.t.send(A_WRTE, self.local_id, self.remote_id, data[i : i + self.t.max_payload])

    def acked(self) -> None:
        self._acked.set()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.t.send(A_CLSE, self.local_id, self.remote_id)
            self.t.streams.pop(self.local_id, None)
        with self._cond:
            self._cond.notify_all()

    def peer_closed(self) -> None:
        self.closed = True
        self.t.streams.pop(self.local_id, None)
        with self._cond:
            self._cond.notify_all()
        self._acked.set()
        if self.on_peer_close:
            self.on_peer_close()


class _Transport:
    """One TCP connection from the adb server, i.e. one USB cable."""

    def __init__(self, sim: "DeviceSimulator", sock: socket.socket):
        self.sim = sim
        self.sock = sock
        self.max_payload = 4096
        self.streams: dict[int, _Stream] = {}
        self._next_id = 1
        self._send_lock = threading.Lock()
        self.dead = False

    def send(self, cmd: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        hdr = struct.pack("<6I", cmd, arg0, arg1, len(data), sum(data) & 0xFFFFFFFF, cmd ^ 0xFFFFFFFF)
        with self._send_lock:
            if self.dead:
                raise _Closed() from None
            try:
                self.sock.sendall(hdr + data)
            except OSError:
                self.dead = True
                raise _Closed() from None

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise _Closed() from None
            buf += chunk
        return bytes(buf)

    def run(self) -> None:
        try:
            while True:
                cmd, arg0, arg1, length, _check, magic = struct.unpack("<6I", self._recv_exact(24))
                if magic != cmd ^ 0xFFFFFFFF:
                    raise _Closed() from None
                data = self._recv_exact(length) if length else b""
                self._dispatch(cmd, arg0, arg1, data)
        except (_Closed, OSError):
            pass
        finally:
            self.kill()

    def kill(self) -> None:
        self.dead = True
        for s in list(self.streams.values()):
            s.peer_closed()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def _dispatch(self, cmd: int, arg0: int, arg1: int, data: bytes) -> None:
        mode = self.sim.mode
        if cmd == A_CNXN:
            self.max_payload = max(4096, min(arg1, MAX_PAYLOAD))
            if mode == "offline":
                return  # never finish the handshake: the server lists it as offline
            if mode == "unauthorized":
                self.send(A_AUTH, AUTH_TOKEN, 0, os.urandom(20))
                return
            self.send(A_CNXN, A_VERSION, MAX_PAYLOAD, self.sim.banner().encode())
        elif cmd == A_AUTH:
            # An unauthorized phone rejects every signature and never shows
            # the (imaginary) user the prompt for the public key.
            if arg0 == AUTH_SIGNATURE:
                self.send(A_AUTH, AUTH_TOKEN, 0, os.urandom(20))
        elif cmd == A_OPEN:
            local_id = self._next_id
            self._next_id += 1
            opened = _Stream(self, local_id, arg0)
            self.streams[local_id] = opened
            service = data.rstrip(b"\0").decode("utf-8", "replace")
            self.send(A_OKAY, local_id, arg0)
            threading.Thread(target=self.sim._serve, args=(opened, service), daemon=True).start()
        elif cmd == A_WRTE:
            stream = self.streams.get(arg1)
            if stream is None:
                self.send(A_CLSE, 0, arg0)
                return
            stream.feed(data)
            self.send(A_OKAY, arg1, arg0)
        elif cmd == A_OKAY:
            stream = self.streams.get(arg1)
            if stream is not None:
                stream.acked()
        elif cmd == A_CLSE:
            stream = self.streams.get(arg1)
            if stream is not None:
                stream.peer_closed()


class DeviceSimulator:
    """A simulated phone on 127.0.0.1:PORT. TEST DOUBLE.

    mode: "device" (ready), "unauthorized" (rejects the host's key) or
    "offline" (never completes the handshake). `fake_files` maps device paths
    outside /data/local/tmp (e.g. /proc/meminfo) to their simulated contents.
    """

    def __init__(self, props: dict[str, str] | None = None, *, mode: str = "device",
                 cpu_cores: int = 8, ram_kib: int = 7_813_528,
                 delegates: tuple[str, ...] = ("cpu", "xnnpack"), toybox_time: bool = True,
                 workdir: Path | None = None):
        self.props = dict(DEFAULT_PROPS)
        self.props.update(props or {})
        self.mode = mode
        self.delegates = delegates
        self._own_dir = workdir is None
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="adbsim-"))
        self.root = self.dir / "data_local_tmp"  # the phone's /data/local/tmp
        self.home = self.dir / "home"
        self.bin = self.dir / "bin"
        for d in (self.root, self.home, self.bin, self.dir / "fake"):
            d.mkdir(parents=True, exist_ok=True)
        self.fake_files = {
            "/proc/meminfo": f"MemTotal:       {ram_kib} kB\nMemFree:         1234567 kB\n",
            "/proc/cpuinfo": "".join(f"processor\t: {i}\nBogoMIPS\t: 38.40\n\n" for i in range(cpu_cores)),
            "/sys/devices/system/cpu/possible": f"0-{cpu_cores - 1}\n",
        }
        self._write_tools(toybox_time)
        self.command_log: list[str] = []  # every shell command, as received
        self.run_log = self.dir / "benchmark_model_runs.log"  # one line per benchmark_model process
        self.pushed: list[str] = []  # every device path written through sync
        self._hooks: list[tuple[str, str, float]] = []
        self._procs: set[subprocess.Popen] = set()
        self._transports: set[_Transport] = set()
        self._listener: socket.socket | None = None
        self.port = 0
        self.vanished = False

    # ---- life cycle -------------------------------------------------
    @property
    def serial(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "DeviceSimulator":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        self._listener = s
        self.port = s.getsockname()[1]
        threading.Thread(target=self._accept_loop, args=(s,), daemon=True).start()
        return self

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            if self.vanished:
                sock.close()
                return
            t = _Transport(self, sock)
            self._transports.add(t)
            threading.Thread(target=t.run, daemon=True).start()

    def vanish(self) -> None:
        """The cable is pulled: drop every connection and refuse new ones."""
        self.vanished = True
        if self._listener is not None:
            self._listener.close()
        for t in list(self._transports):
            t.kill()
        for p in list(self._procs):
            self._kill(p)

    def stop(self) -> None:
        self.vanish()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def vanish_during(self, needle: str, after_s: float = 0.3) -> None:
        """Pull the cable `after_s` seconds into the first command containing `needle`."""
        self._hooks.append(("vanish", needle, after_s))

    # ---- what the device is ----------------------------------------
    def banner(self) -> str:
        p = self.props
        return (f"device::ro.product.name={p['ro.product.name']};ro.product.model={p['ro.product.model']};"
                f"ro.product.device={p['ro.product.device']};features=shell_v2,cmd")

    def device_path(self, path: str) -> Path | None:
        """Host path for a device path, or None when it is outside the phone's
        /data/local/tmp (which is all a shell user may write)."""
        if path != DEVICE_TMP and not path.startswith(DEVICE_TMP + "/"):
            return None
        host = (self.root / path[len(DEVICE_TMP):].lstrip("/")).resolve()
        if host != self.root.resolve() and self.root.resolve() not in host.parents:
            return None
        return host

    def benchmark_runs(self) -> list[str]:
        """The arguments of every benchmark_model process started on the phone so far, one string each
        (the double writes them; a shell command can start many)."""
        try:
            return self.run_log.read_text().splitlines()
        except FileNotFoundError:
            return []

    def listing(self) -> list[str]:
        """Every file under the phone's /data/local/tmp, as device paths."""
        return sorted(DEVICE_TMP + "/" + str(p.relative_to(self.root)) for p in self.root.rglob("*"))

    def _write_tools(self, toybox_time: bool) -> None:
        props_json = self.dir / "props.json"
        props_json.write_text(json.dumps(self.props))
        for i, text in enumerate(self.fake_files.values()):
            (self.dir / "fake" / f"{i}").write_text(text)
        tools = {"getprop": _GETPROP.format(python=sys.executable, props=str(props_json)),
                 "toybox": _TOYBOX.format(python=sys.executable, time_v=toybox_time),
                 "timeout": _TIMEOUT.replace("{python}", sys.executable)}
        for name, text in tools.items():
            p = self.bin / name
            p.write_text(text)
            p.chmod(0o755)

    def _rewrite(self, cmd: str) -> str:
        cmd = cmd.replace(DEVICE_TMP, str(self.root))
        for i, dev in enumerate(self.fake_files):
            cmd = cmd.replace(dev, str(self.dir / "fake" / f"{i}"))
        return cmd

    def _env(self) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "TMPDIR": str(self.root),
            "ANDROID_DATA": "/data",
            "DEPLOYTOOL_SIM_DELEGATES": ",".join(self.delegates),
            "DEPLOYTOOL_SIM_RUN_LOG": str(self.run_log),
            "LANG": "C.UTF-8",
        }

    # ---- services -----------------------------------------------------
    def _serve(self, stream: _Stream, service: str) -> None:
        try:
            if service.startswith("shell,v2") or service.startswith("shell,"):
                opts, _, cmd = service.partition(":")
                self._shell(stream, cmd, v2="v2" in opts.split(","))
            elif service.startswith("shell:"):
                self._shell(stream, service[len("shell:"):], v2=False)
            elif service.startswith("exec:"):
                self._shell(stream, service[len("exec:"):], v2=False, merge=False)
            elif service == "sync:":
                self._sync(stream)
            stream.close()
        except _Closed:
            pass
        except Exception as e:  # a bug in the double must not hang the test
            sys.stderr.write(f"adbsim: {service!r}: {e!r}\n")
            try:
                stream.close()
            except _Closed:
                pass

    def _kill(self, p: subprocess.Popen) -> None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _shell(self, stream: _Stream, cmd: str, v2: bool, merge: bool = True) -> None:
        self.command_log.append(cmd)
        if not cmd.strip():
            if v2:
                stream.write(struct.pack("<BI", 3, 1) + b"\0")
            return
        p = subprocess.Popen(["/bin/sh", "-c", self._rewrite(cmd)], cwd=self.root, env=self._env(),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT if (merge and not v2) else subprocess.PIPE,
                             start_new_session=True)
        self._procs.add(p)
        # adbd hangs up on the shell when the host closes the stream.
        stream.on_peer_close = lambda: self._kill(p)
        for action, needle, after_s in list(self._hooks):
            if action == "vanish" and needle in cmd:
                self._hooks.remove((action, needle, after_s))
                threading.Timer(after_s, self.vanish).start()

        def pump(pipe, packet_id: int) -> None:
            for chunk in iter(lambda: pipe.read1(65536), b""):
                try:
                    stream.write(struct.pack("<BI", packet_id, len(chunk)) + chunk if v2 else chunk)
                except _Closed:
                    self._kill(p)
                    break

        pumps = [threading.Thread(target=pump, args=(p.stdout, 1), daemon=True)]
        if p.stderr is not None:
            pumps.append(threading.Thread(target=pump, args=(p.stderr, 2), daemon=True))
        for t in pumps:
            t.start()
        for t in pumps:
            t.join()
        code = p.wait()
        self._procs.discard(p)
        if v2:
            stream.write(struct.pack("<BI", 3, 1) + bytes([code & 0xFF if code >= 0 else (128 - code) & 0xFF]))

    def _sync(self, stream: _Stream) -> None:
        while True:
            try:
                hdr = stream.read_exact(8)
            except _Closed:
                return
            cmd, n = hdr[:4], struct.unpack("<I", hdr[4:])[0]
            if cmd == b"QUIT":
                return
            arg = stream.read_exact(n).decode("utf-8", "replace")
            if cmd == b"STAT":
                host = self.device_path(arg)
                try:
                    st = host.stat() if host else None
                except OSError:
                    st = None
                body = struct.pack("<III", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime)) if st else b"\0" * 12
                stream.write(b"STAT" + body)
            elif cmd == b"LIST":
                host = self.device_path(arg)
                out = bytearray()
                if host and host.is_dir():
                    for name in [".", ".."] + sorted(os.listdir(host)):
                        st = (host / name).stat()
                        nb = name.encode()
                        out += b"DENT" + struct.pack("<IIII", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime), len(nb)) + nb
                out += b"DONE" + b"\0" * 16
                stream.write(bytes(out))
            elif cmd == b"SEND":
                path, _, mode_s = arg.rpartition(",")
                data = bytearray()
                while True:
                    h = stream.read_exact(8)
                    kind, size = h[:4], struct.unpack("<I", h[4:])[0]
                    if kind == b"DATA":
                        data += stream.read_exact(size)
                    elif kind == b"DONE":
                        break
                    else:
                        raise _Closed() from None
                host = self.device_path(path)
                if host is None:
                    msg = f"remote couldn't create file: Permission denied ({path})".encode()
                    stream.write(b"FAIL" + struct.pack("<I", len(msg)) + msg)
                    continue
                host.parent.mkdir(parents=True, exist_ok=True)  # adbd creates parents too
                host.write_bytes(bytes(data))
                host.chmod(int(mode_s or "0") & 0o7777 or 0o644)
                self.pushed.append(path)
                stream.write(b"OKAY" + b"\0" * 4)
            elif cmd == b"RECV":
                host = self.device_path(arg)
                if host is None or not host.is_file():
                    msg = b"No such file or directory"
                    stream.write(b"FAIL" + struct.pack("<I", len(msg)) + msg)
                    continue
                with open(host, "rb") as fh:
                    for chunk in iter(lambda: fh.read(64 * 1024), b""):
                        stream.write(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
                stream.write(b"DONE" + b"\0" * 4)
            else:
                msg = f"unknown sync command {cmd!r}".encode()
                stream.write(b"FAIL" + struct.pack("<I", len(msg)) + msg)
                return


def wait_for_state(client, serial: str, states: tuple[str, ...], timeout_s: float = 10.0) -> str:
    """Poll the real adb server until `serial` is in one of `states`."""
    deadline = time.monotonic() + timeout_s
    last = "absent"
    while time.monotonic() < deadline:
        last = next((d.state for d in client.list() if d.serial == serial), "absent")
        if last in states:
            return last
        time.sleep(0.05)
    raise TimeoutError(f"{serial} stayed {last!r}, wanted {states}")
