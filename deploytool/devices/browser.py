"""`Chromium`: one headless Debian Chromium driven by Playwright, as a device
the web runtime runs models on. It launches the system binary (never a
Playwright browser download), keeps it off the network except 127.0.0.1,
runs every page in one browser profile of its own (a temporary user data
directory that Playwright's driver creates and removes when the browser
closes, or when the driver exits because its parent died), so pages share
the profile's HTTP cache and V8's JS and wasm code cache while each page still
runs in a renderer process of its own (see `new_page`), describes itself (version, user agent, wasm SIMD/threads, cross-origin
isolation), measures its renderers' peak RSS, and on close makes sure every
process it started is gone. It knows nothing about models or the harness page.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from deploytool.errors import HarnessMissing
from deploytool.workspace import cache_home

ENV_EXECUTABLE = "DEPLOYTOOL_CHROMIUM"
# The real binary first: the /usr/bin/chromium wrapper adds Debian's flags and
# extensions, which we do not want in a measurement.
DEFAULT_EXECUTABLES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")

# A browser's config home (its XDG_CONFIG_HOME) is a temporary folder named after the process that launched it:
# `deploytool-chromium-config-<pid>-<random>`, removed when the browser closes
CONFIG_PREFIX = "deploytool-chromium-config-"


def sweep_stale_config_homes() -> list[Path]:
    """Remove the config homes of browsers whose deploytool process died without closing them (killed with SIGKILL,
    or by the kernel's OOM killer: nothing of it ran to remove its folder), before a browser is launched: a folder
    whose launching process is gone and which no live process names (Chromium's crash handler outlives its browser
    for a moment). A folder of a live process, or one of an older version (no pid in its name), is left alone.
    Returns the folders removed."""
    import psutil

    stale = []
    for folder in Path(tempfile.gettempdir()).glob(f"{CONFIG_PREFIX}*-*"):
        pid = folder.name[len(CONFIG_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)) and folder.is_dir():
            stale.append(folder)
    if not stale:
        return []
    named = _naming([str(f) for f in stale])
    removed = [f for f in stale if not named[str(f)]]
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)
    return removed


def _naming(folders: list[str]) -> dict[str, list[Any]]:
    """Each folder -> the live processes (psutil.Process) whose command line names it."""
    import psutil

    named: dict[str, list[Any]] = {f: [] for f in folders}
    for p in psutil.process_iter(["cmdline"]):
        args = p.info["cmdline"] or ()
        for f in folders:
            if any(f in a for a in args):
                named[f].append(p)
    return named


CHROMIUM_FLAGS = (
    "--no-sandbox",  # we run as root in a container; the sandbox needs user namespaces
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
    "--enable-precise-memory-info",  # performance.memory otherwise rounds and delays
    "--disable-dev-shm-usage",
    # Nothing but the harness server may be reached, even by accident.
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
)

# Added only for the browser that runs WebGPU rows: a WebGPU adapter on a machine without a GPU driver
# Chromium trusts (here: SwiftShader's, a software adapter). Measured with Debian's Chromium 156: with these,
# navigator.gpu.requestAdapter() gives vendor "google", architecture "swiftshader" in a secure context (a page
# from 127.0.0.1); `--use-angle=vulkan --use-vulkan=swiftshader` instead gave none.
WEBGPU_FLAGS = ("--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader")

# What the page can say about itself; run in any page of the harness origin.
_DESCRIBE_JS = """() => {
  const simd = WebAssembly.validate(new Uint8Array([0,97,115,109,1,0,0,0,1,5,1,96,0,1,123,3,2,1,0,10,10,1,8,0,65,0,253,15,253,98,11]));
  return {
    user_agent: navigator.userAgent,
    cross_origin_isolated: self.crossOriginIsolated === true,
    wasm_simd: simd,
    wasm_threads: typeof SharedArrayBuffer === 'function' && self.crossOriginIsolated === true,
    hardware_concurrency: navigator.hardwareConcurrency,
  };
}"""


def find_chromium() -> Path:
    """The Chromium executable: $DEPLOYTOOL_CHROMIUM, else Debian's binary."""
    env = os.environ.get(ENV_EXECUTABLE)
    if env:
        p = Path(env)
        if p.is_file() and os.access(p, os.X_OK):
            return p
        raise HarnessMissing(f"{ENV_EXECUTABLE}={env} is not an executable file: point it at a "
                             f"Chromium binary, or unset it and run `make setup` (apt-get install chromium)")
    for cand in DEFAULT_EXECUTABLES:
        if Path(cand).is_file() and os.access(cand, os.X_OK):
            return Path(cand)
    found = shutil.which("chromium")
    if found:
        return Path(found)
    raise HarnessMissing("Chromium is not installed (looked in "
                         f"{', '.join(DEFAULT_EXECUTABLES)}): run `make setup` "
                         f"(apt-get install chromium) or set {ENV_EXECUTABLE}")


def chromium_build(executable: Path | None = None) -> str:
    """`Chromium 156.0.8078.114` of the binary that will run; part of a web row's identity, so a browser
    upgrade measures again instead of reusing old rows. Asking the binary costs ~50-80 ms, a good part of a
    re-run that measures nothing: the answer is kept per binary file (path, size, times, inode), which an
    upgrade replaces. A script (a wrapper that may start another binary) is asked every time."""
    exe = Path(executable or find_chromium())
    stamp = _binary_stamp(exe)
    known = _known_builds()
    if stamp is not None and stamp in known:
        return known[stamp]
    out = _ask_version(exe)
    if stamp is not None and out:
        _remember_build(stamp, out)
    if not out:  # still an identity: the binary itself, by size and time
        st = exe.stat()
        out = f"{exe} size={st.st_size} mtime={int(st.st_mtime)}"
    return out


def _ask_version(exe: Path) -> str:
    import subprocess

    try:
        return subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _binary_stamp(exe: Path) -> str | None:
    """What identifies this very file (None for a script, or a file that cannot be read)."""
    try:
        real = exe.resolve()
        with open(real, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return None
        st = real.stat()
    except OSError:
        return None
    return f"{real}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}|{st.st_ino}|{st.st_dev}"


def _builds_file() -> Path:
    return cache_home() / "chromium-builds.json"


def _known_builds() -> dict[str, str]:
    import json

    try:
        known = json.loads(_builds_file().read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in known.items() if isinstance(v, str) and v} if isinstance(known, dict) else {}


def _remember_build(stamp: str, build: str) -> None:
    """Best effort (an unwritable cache folder only costs the next run the question), written whole by rename."""
    import json

    path = _builds_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".chromium-builds-", delete=False) as f:
            try:
                json.dump({**_known_builds(), stamp: build}, f)
            except OSError:
                os.unlink(f.name)
                raise
        os.replace(f.name, path)
    except OSError:
        pass


def _status_kib(pid: int, field: str) -> int | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) if m else None


class Chromium:
    """A headless Chromium with one life: `launch()`, `new_page()`, `close()`.

    `driver`: a started Playwright (`sync_playwright().start()`) shared with other browsers of the same thread —
    Playwright's sync API allows one per thread, so two browsers open at once must share it; its owner stops it.
    Without one the browser starts and stops a driver of its own."""

    def __init__(self, executable: Path | str | None = None, extra_args: tuple[str, ...] = (), driver: Any = None):
        self.executable = Path(executable) if executable else find_chromium()
        self.extra_args = tuple(extra_args)
        self.launch_ms: float | None = None
        self._shared_driver = driver
        self._pw: Any = None
        self._browser: Any = None
        self._context: Any = None  # the profile's one persistent context: every page opens in it
        self.profile_dir: Path | None = None  # its user data directory, while the browser runs
        # psutil.Process objects, not bare pids: they refuse to signal a pid
        # that was reused by another process after ours died.
        self._procs: dict[int, Any] = {}
        self._browser_pid: int | None = None
        self._config_home = ""  # the browser's XDG_CONFIG_HOME, a temporary folder of its own

    # life cycle
    def launch(self) -> "Chromium":
        import psutil
        from playwright.sync_api import sync_playwright

        me = psutil.Process()
        before = {p.pid for p in me.children(recursive=True)}
        t0 = time.perf_counter()
        driver = self._shared_driver
        if driver is None:
            driver = self._pw = sync_playwright().start()
        try:
            # "": the driver makes a temporary profile and deletes it with the browser (on close, and when
            # the driver exits because its parent died). A persistent context, not browser.new_context(): an
            # incognito context keeps its HTTP cache in memory (onnxruntime-web's 15 MB wasm did not stay in
            # it) and no code cache at all, and a fresh context per page would throw both away.
            # Nothing of the browser's outside its own temporary folders: its config home (crashpad's "Crash
            # Reports" database goes there, not to ~/.config/chromium) and GLib settings in memory (no
            # ~/.cache/dconf); both removed with the browser.
            sweep_stale_config_homes()
            self._config_home = tempfile.mkdtemp(prefix=f"{CONFIG_PREFIX}{os.getpid()}-")
            self._context = driver.chromium.launch_persistent_context(
                "",
                executable_path=str(self.executable),
                headless=True,
                args=list(CHROMIUM_FLAGS + self.extra_args),
                env={**os.environ, "XDG_CONFIG_HOME": self._config_home, "GSETTINGS_BACKEND": "memory"},
            )
            self._browser = self._context.browser
            for page in list(self._context.pages):  # the blank tab a profile opens with: no renderer idles
                page.close()
        except Exception:
            if self._context is not None:
                try:
                    self._context.close()
                except Exception:
                    pass
            self._context = self._browser = None
            if self._pw is not None:
                self._pw.stop()
            self._pw = None
            raise
        self.launch_ms = (time.perf_counter() - t0) * 1e3
        self._browser_pid = self._find_browser_pid(me, before)
        self._refresh_pids()
        self.profile_dir = self._profile_of(self._browser_pid)
        return self

    @staticmethod
    def _profile_of(pid: int | None) -> Path | None:
        import psutil

        try:
            cmd = psutil.Process(pid).cmdline() if pid is not None else []
        except psutil.Error:
            return None
        found = [a.split("=", 1)[1] for a in cmd if a.startswith("--user-data-dir=")]
        return Path(found[-1]) if found else None

    def _find_browser_pid(self, me: Any, before: set[int]) -> int | None:
        import psutil

        exe = os.path.realpath(self.executable)
        for p in me.children(recursive=True):
            if p.pid in before:
                continue
            try:
                cmd = p.cmdline()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if cmd and os.path.realpath(cmd[0]) == exe and not any(a.startswith("--type=") for a in cmd):
                return p.pid
        return None

    def _refresh_pids(self) -> None:
        """Remember every Chromium process of ours, so close() can reap them all."""
        import psutil

        if self._browser_pid is None:
            return
        try:
            root = psutil.Process(self._browser_pid)
            for p in [root, *root.children(recursive=True)]:
                self._procs.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            pass

    def new_page(self) -> Any:
        """A new tab in the profile; close it when done. Each tab is a new browsing context group, so Chromium
        (156, measured) starts a renderer process for it: its JS heap, wasm memory and VmHWM are its own, while
        the HTTP cache and the code caches are the profile's. Close the previous row's tab first: a renderer
        that still hosts a page of the same site could be chosen for the next one."""
        if self._context is None:
            raise RuntimeError("launch() the browser first")
        page = self._context.new_page()
        self._refresh_pids()
        return page

    @property
    def connected(self) -> bool:
        return self._browser is not None and self._browser.is_connected()

    def reset_peak_rss(self, process_type: str) -> bool:
        """Start the VmHWM of our processes of this type (renderer, gpu-process) afresh, so a peak
        read later is that of what ran since; False if the kernel refused for any of them."""
        ok = True
        for pid in self.live_process_ids(process_type):
            try:
                Path(f"/proc/{pid}/clear_refs").write_text("5")  # 5: reset the peak RSS (Linux >= 4.0)
            except OSError:
                ok = False
        return ok

    def close(self) -> None:
        """Close the browser and make sure none of its processes outlive it."""
        import psutil

        self._refresh_pids()
        try:
            if self._context is not None:
                self._context.close()  # a persistent context's close ends its browser and removes its profile
        except Exception:  # a crashed or hung browser: the reaping below handles it
            pass
        finally:
            self._browser = self._context = None
            self.profile_dir = None
            try:
                if self._pw is not None:
                    self._pw.stop()
            except Exception:
                pass
            self._pw = None
        # A zombie is dead (no memory, no threads): only its parent, which
        # after the driver exits is init, still has to reap it. Waiting for
        # init would cost a second per run for nothing.
        if not self._wait_all_gone(3.0):
            for pid in self.alive_process_ids():
                try:
                    self._procs[pid].kill()
                except psutil.NoSuchProcess:
                    pass
            self._wait_all_gone(3.0)
        self._remove_config_home()  # once nothing of the browser (its crash handler too) can write there

    def _remove_config_home(self) -> None:
        """Its crash handler (which leaves the browser's process tree, so nothing above reaped it) ended first,
        else it would write its database there again."""
        import psutil

        if not self._config_home:
            return
        for p in _naming([self._config_home])[self._config_home]:
            try:
                p.kill()
                p.wait(3)
            except (psutil.Error, OSError):
                pass
        shutil.rmtree(self._config_home, ignore_errors=True)
        self._config_home = ""

    def _wait_all_gone(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.alive_process_ids():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def __enter__(self) -> "Chromium":
        return self.launch()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # facts
    @property
    def version(self) -> str:
        return self._browser.version if self._browser is not None else ""

    @property
    def process_ids(self) -> set[int]:
        """Every Chromium process seen so far (browser, renderers, GPU, utility)."""
        self._refresh_pids()
        return set(self._procs)

    def alive_process_ids(self) -> set[int]:
        """Processes of ours that still run (zombies count as gone)."""
        import psutil

        alive = set()
        for pid, p in self._procs.items():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.add(pid)
            except psutil.NoSuchProcess:
                pass
        return alive

    def describe(self, page: Any) -> dict[str, Any]:
        """Version, user agent, wasm SIMD/threads availability, isolation."""
        facts = dict(page.evaluate(_DESCRIBE_JS))
        facts["browser"] = "chromium"
        facts["browser_version"] = self.version
        facts["executable"] = str(self.executable)
        facts["headless"] = True
        return facts

    def live_process_ids(self, process_type: str) -> list[int]:
        """Our live processes of one type (renderer, gpu-process)."""
        import psutil

        self._refresh_pids()
        out = []
        for pid, p in self._procs.items():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE and f"--type={process_type}" in p.cmdline():
                    out.append(pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return out

    def _peak_rss_of(self, process_type: str, exclude: "set[int] | frozenset[int]" = frozenset()) -> int | None:
        peak = None
        for pid in set(self.live_process_ids(process_type)) - set(exclude):
            kib = _status_kib(pid, "VmHWM")
            if kib is not None:
                peak = max(peak or 0, kib * 1024)
        return peak

    def renderer_peak_rss_bytes(self, exclude: "set[int] | frozenset[int]" = frozenset()) -> int | None:
        """Largest VmHWM among renderer processes (the page's renderer is the
        biggest; a spare renderer may also exist), leaving out `exclude` (the
        renderers of earlier pages, still exiting). None if none is alive."""
        return self._peak_rss_of("renderer", exclude)

    def gpu_process_peak_rss_bytes(self) -> int | None:
        """VmHWM of the GPU process, where WebGL runs (SwiftShader here)."""
        return self._peak_rss_of("gpu-process")
