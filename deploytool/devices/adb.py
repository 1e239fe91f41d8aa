"""Android devices over ADB (through adbutils and the user's adb server): list
them with their facts and readiness, select one or all, push, run with an exit
code and a device-side `timeout`, pull, and keep a per-run folder under
/data/local/tmp/deploytool/ that is removed afterwards.

Every command sent to a device is built from a list of arguments, each passed
through shlex.quote: no file or model name can inject a command. Every adbutils
or adb-server error leaves this module as a DeviceNotFound or DeviceError with
one line that says what is wrong and how to check. This module knows nothing
about models or benchmarks, and must not import adbutils at module level.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shlex
import socket
import subprocess
import uuid
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator, Sequence

from deploytool.errors import DeviceError, DeviceNotFound
from deploytool.value import value

DEVICE_ROOT = "/data/local/tmp/deploytool"
NO_DEVICE = "no Android device attached: connect one and check `adb devices`"
# Seconds a device-side `timeout` waits after TERM before it sends KILL.
KILL_AFTER_S = 2

_STATE_PROBLEMS = {
    "unauthorized": "is unauthorized: unlock the phone, accept the 'Allow USB debugging' prompt, then check `adb devices`",
    "offline": "is offline: reconnect the cable (or `adb reconnect`), then check `adb devices`",
    "no permissions": "cannot be opened (no permissions): fix the udev rules for adb, then check `adb devices`",
    "recovery": "is in recovery mode: reboot it into Android, then check `adb devices`",
    "sideload": "is in sideload mode: reboot it into Android, then check `adb devices`",
    "bootloader": "is in the bootloader: reboot it into Android, then check `adb devices`",
}


class DeviceLost(DeviceError):
    """The device went away (cable pulled, adbd died) during an operation."""


@value
class DeviceInfo:
    serial: str
    state: str  # as `adb devices` says: device, unauthorized, offline, ...
    model: str = ""
    manufacturer: str = ""
    soc: str = ""  # ro.soc.model, else ro.board.platform
    board: str = ""  # ro.board.platform
    android_version: str = ""
    sdk: int | None = None
    abi: str = ""
    abilist: tuple[str, ...] = ()
    cpu_cores: int | None = None
    ram_bytes: int | None = None
    problem: str = ""  # why it is not ready, with the fix; "" when ready

    @property
    def ready(self) -> bool:
        return self.state == "device" and not self.problem

    def to_environment(self) -> dict[str, Any]:
        """Facts for a result's provenance, prefixed so they read on their own."""
        d = asdict(self)
        d["abilist"] = ",".join(self.abilist)
        d.pop("problem")
        return {f"device_{k}": v for k, v in d.items()}


@value
class ShellResult:
    command: str  # exactly what was sent to the device
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def timed_out(self) -> bool:
        return self.exit_code in (124, 137)


def quote_args(args: Sequence[Any]) -> str:
    """One shell command from its arguments, each quoted."""
    if not args:
        raise ValueError("empty command")
    return " ".join(shlex.quote(str(a)) for a in args)


def _server_port() -> int:
    return int(os.environ.get("ANDROID_ADB_SERVER_PORT", "5037"))


def _server_where() -> str:
    return f"{os.environ.get('ANDROID_ADB_SERVER_HOST', '127.0.0.1')}:{_server_port()}"


@contextmanager
def _server_errors() -> Iterator[None]:
    """adbutils/adb-server failures while *finding* devices, as one clear line."""
    from adbutils.errors import AdbConnectionError, AdbError, AdbTimeout

    try:
        yield
    except (FileNotFoundError, PermissionError) as e:
        path = os.environ.get("ADBUTILS_ADB_PATH") or getattr(e, "filename", None) or "adb"
        raise DeviceNotFound(f"cannot start the adb server: {path} is missing or not executable: "
                             "install adb (Debian: `apt-get install adb`) or set ADBUTILS_ADB_PATH") from None
    except (AdbConnectionError, AdbTimeout, subprocess.TimeoutExpired, ConnectionError, socket.timeout) as e:
        raise DeviceNotFound(f"cannot reach the adb server on {_server_where()} ({e}): "
                             "start it with `adb start-server` and check `adb devices`") from None
    except AdbError as e:
        msg = str(e.args[0] if e.args else e)
        if "No adb exe" in msg:
            raise DeviceNotFound("adb is not installed: install it (Debian: `apt-get install adb`) "
                                 "or set ADBUTILS_ADB_PATH") from None
        if "more than one" in msg:
            raise DeviceError("several Android devices are attached: choose one with --device SERIAL "
                              "or ANDROID_SERIAL (see `adb devices`)") from None
        m = re.search(r"device '([^']*)' not found", msg)
        if m:
            raise DeviceNotFound(f"Android device {m.group(1)!r} is not attached: check `adb devices`") from None
        if "Can't find any android device" in msg:
            raise DeviceNotFound(NO_DEVICE) from None
        raise DeviceError(f"the adb server refused the request ({msg}): check `adb devices`") from None


def _start_server_quietly() -> None:
    """Start a local adb server ourselves when none listens, with its output captured: adbutils would start
    it too, but its `adb start-server` prints "* daemon not running; starting now" onto the user's stderr,
    in front of deploytool's own one-line messages. A remote server (ANDROID_ADB_SERVER_HOST) is left alone."""
    from adbutils._utils import adb_path

    host = os.environ.get("ANDROID_ADB_SERVER_HOST", "127.0.0.1")
    if host not in ("127.0.0.1", "localhost", "::1"):
        return
    try:
        socket.create_connection((host, _server_port()), timeout=3).close()
        return
    except OSError:
        pass
    subprocess.run([adb_path(), "start-server"], capture_output=True, timeout=20, check=False)


def _client() -> Any:
    from adbutils import AdbClient

    _start_server_quietly()
    return AdbClient(port=_server_port(), socket_timeout=30)


def list_device_states() -> list[tuple[str, str]]:
    """(serial, state) of everything the adb server knows, ready or not."""
    with _server_errors():
        return [(d.serial, d.state) for d in _client().list()]


def _problem(serial: str, state: str) -> str:
    if state == "device":
        return ""
    return f"Android device {serial} " + _STATE_PROBLEMS.get(state, f"is in state {state!r}: check `adb devices`")


def describe_devices() -> list[DeviceInfo]:
    """Every attached device with its facts (facts only for ready ones)."""
    infos = []
    for serial, state in list_device_states():
        if state != "device":
            infos.append(DeviceInfo(serial, state, problem=_problem(serial, state)))
            continue
        try:
            infos.append(AndroidDevice(serial).describe())
        except DeviceError as e:
            infos.append(DeviceInfo(serial, state, problem=str(e)))
    return infos


def format_device_table(devices: Sequence[DeviceInfo]) -> str:
    """What `deploytool devices` prints: one row per device, ready or not."""
    if not devices:
        return NO_DEVICE
    header = ("SERIAL", "STATE", "READY", "MODEL", "MANUFACTURER", "SOC", "ANDROID", "SDK", "ABI", "CORES", "RAM")
    rows = [header]
    for d in devices:
        rows.append((d.serial, d.state, "yes" if d.ready else "no", d.model or "-", d.manufacturer or "-",
                     d.soc or "-", d.android_version or "-", str(d.sdk) if d.sdk is not None else "-",
                     d.abi or "-", str(d.cpu_cores) if d.cpu_cores else "-",
                     f"{d.ram_bytes / 2**30:.1f} GiB" if d.ram_bytes else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    problems = [d.problem for d in devices if d.problem]
    return "\n".join(lines + problems)


def select_devices(serial: str | None = None, all_devices: bool = False) -> list[str]:
    """Serials to run on: `serial`, else $ANDROID_SERIAL, else every ready
    device (`all_devices`) or the only one attached."""
    serial = serial or os.environ.get("ANDROID_SERIAL") or None
    states = list_device_states()
    if serial:
        state = dict(states).get(serial)
        if state is None:
            attached = ", ".join(s for s, _ in states) or "none"
            raise DeviceNotFound(f"Android device {serial!r} is not attached (attached: {attached}): check `adb devices`")
        if state != "device":
            raise DeviceError(_problem(serial, state))
        return [serial]
    if not states:
        raise DeviceNotFound(NO_DEVICE)
    ready = [s for s, st in states if st == "device"]
    if not ready:
        s, st = states[0]
        raise DeviceError(_problem(s, st))
    if all_devices or len(ready) == 1:
        return ready
    raise DeviceError(f"{len(ready)} Android devices are attached ({', '.join(ready)}): "
                      "choose one with --device SERIAL or ANDROID_SERIAL, or run on all of them")


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class AndroidDevice:
    """A session on one device: run commands, move files, own a run folder."""

    def __init__(self, serial: str):
        self.serial = serial
        with _server_errors():
            self._d = _client().device(serial)
        self._info: DeviceInfo | None = None

    # ---- errors -------------------------------------------------------
    def _state(self) -> str:
        try:
            return dict(list_device_states()).get(self.serial, "absent")
        except DeviceError:
            return "unknown (adb server unreachable)"

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        from adbutils.errors import AdbError

        try:
            yield
        except (AdbError, EOFError, OSError, subprocess.TimeoutExpired) as e:
            state = self._state()
            if state != "device":
                raise DeviceLost(f"Android device {self.serial} went away while {what} (now {state}): "
                                 "check the cable and `adb devices`") from None
            detail = " ".join(str(a) for a in getattr(e, "args", ())[:1]) or type(e).__name__
            raise DeviceError(f"adb failed while {what} on {self.serial}: {detail}") from None

    # ---- commands -----------------------------------------------------
    def shell(self, args: Sequence[Any], *, cwd: str | None = None, timeout_s: float | None = None,
              what: str = "running a command") -> ShellResult:
        """Run one command (a list of arguments, quoted here) and wait for it.

        With `timeout_s`, the command runs under the device's own `timeout`
        (the client-side socket timeout alone would leave it running there).
        """
        cmd = quote_args(args)
        if timeout_s is not None:
            cmd = quote_args(["timeout", "-k", KILL_AFTER_S, _secs(timeout_s)]) + " " + cmd
        if cwd is not None:
            cmd = quote_args(["cd", cwd]) + " && " + cmd
        socket_timeout = None if timeout_s is None else timeout_s + KILL_AFTER_S + 30
        with self._errors(what):
            r = self._d.shell2(cmd, timeout=socket_timeout or 120, v2=True)
        return ShellResult(cmd, int(r.returncode), r.stdout, r.stderr)

    def getprops(self) -> dict[str, str]:
        r = self.shell(["getprop"], timeout_s=20, what="reading its properties")
        return dict(re.findall(r"^\[([^\]]*)\]: \[(.*)\]\s*$", r.stdout, re.M))

    def read_text(self, path: str) -> str:
        r = self.shell(["cat", path], timeout_s=20, what=f"reading {path}")
        return r.stdout if r.exit_code == 0 else ""

    def describe(self) -> DeviceInfo:
        if self._info is None:
            props = self.getprops()
            cores = _count_cpus(self.read_text("/sys/devices/system/cpu/possible"),
                                self.read_text("/proc/cpuinfo"))
            m = re.search(r"^MemTotal:\s+(\d+)\s*kB", self.read_text("/proc/meminfo"), re.M)
            sdk = props.get("ro.build.version.sdk", "")
            abilist = tuple(a for a in props.get("ro.product.cpu.abilist", "").split(",") if a)
            abi = props.get("ro.product.cpu.abi", "") or (abilist[0] if abilist else "")
            self._info = DeviceInfo(
                serial=self.serial, state="device",
                model=props.get("ro.product.model", ""),
                manufacturer=props.get("ro.product.manufacturer", ""),
                soc=props.get("ro.soc.model", "") or props.get("ro.board.platform", "") or props.get("ro.hardware", ""),
                board=props.get("ro.board.platform", ""),
                android_version=props.get("ro.build.version.release", ""),
                sdk=int(sdk) if sdk.isdigit() else None,
                abi=abi, abilist=abilist or ((abi,) if abi else ()),
                cpu_cores=cores, ram_bytes=int(m.group(1)) * 1024 if m else None)
        return self._info

    # ---- files --------------------------------------------------------
    def push(self, local: Path | str, remote: str, mode: int = 0o644) -> None:
        with self._errors(f"pushing {Path(local).name}"):
            self._d.sync.push(Path(local), remote, mode=mode, check=True)

    def pull(self, remote: str, local: Path | str) -> None:
        with self._errors(f"pulling {posixpath.basename(remote)}"):
            if self._d.sync.stat(remote).mtime is None:
                raise DeviceError(f"{remote} does not exist on {self.serial}")
            self._d.sync.pull_file(remote, Path(local))

    def free_bytes(self, path: str) -> int | None:
        """Bytes free for this user on the filesystem holding `path` (df's Available column, POSIX format so a
        long device name does not wrap the line); None when df cannot say."""
        r = self.shell(["df", "-kP", path], timeout_s=20, what="reading its free storage")
        rows = [line.split() for line in r.stdout.strip().splitlines()[1:] if line.strip()]
        if r.exit_code != 0 or not rows or len(rows[-1]) < 4 or not rows[-1][3].isdigit():
            return None
        return int(rows[-1][3]) * 1024

    def file_size(self, remote: str) -> int | None:
        with self._errors(f"checking {posixpath.basename(remote)}"):
            st = self._d.sync.stat(remote)
        return None if st.mtime is None else int(st.size)

    def file_sha256(self, remote: str) -> str | None:
        r = self.shell(["sha256sum", remote], timeout_s=60, what="hashing a file")
        m = re.match(r"([0-9a-f]{64})\b", r.stdout.strip())
        return m.group(1) if r.exit_code == 0 and m else None

    def ensure_file(self, local: Path, remote_dir: str, name: str, mode: int = 0o755) -> tuple[str, bool]:
        """Push `local` to remote_dir/<sha256[:16]>/name unless the same bytes
        are there already. Returns (remote path, pushed)."""
        digest = _sha256(local)
        remote = f"{remote_dir}/{digest[:16]}/{name}"
        size = local.stat().st_size
        if self.file_size(remote) == size and self.file_sha256(remote) in (digest, None):
            return remote, False
        self.push(local, remote, mode=mode)
        return remote, True

    def make_dir(self, remote: str) -> None:
        r = self.shell(["mkdir", "-p", remote], timeout_s=20, what="creating a folder")
        if r.exit_code != 0:
            raise DeviceError(f"cannot create {remote} on {self.serial}: {r.output.strip()}")

    def new_run_dir(self) -> str:
        path = f"{DEVICE_ROOT}/run-{uuid.uuid4().hex[:12]}"
        self.make_dir(path)
        return path

    def remove(self, remote: str) -> None:
        """Delete a folder this tool made; refuses anything outside DEVICE_ROOT."""
        norm = posixpath.normpath(remote)
        if not norm.startswith(DEVICE_ROOT + "/"):
            raise ValueError(f"refusing to delete {remote!r}: not under {DEVICE_ROOT}")
        self.shell(["rm", "-rf", norm], timeout_s=60, what="cleaning up")


def _secs(timeout_s: float) -> str:
    return str(max(1, int(-(-timeout_s // 1))))


def _count_cpus(possible: str, cpuinfo: str) -> int | None:
    """Cores from /sys/devices/system/cpu/possible ("0-7"), else /proc/cpuinfo."""
    total = 0
    for part in possible.strip().split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if not m:
            total = 0
            break
        total += (int(m.group(2)) - int(m.group(1)) + 1) if m.group(2) else 1
    if total:
        return total
    n = len(re.findall(r"^processor\s*:", cpuinfo, re.M))
    return n or None
