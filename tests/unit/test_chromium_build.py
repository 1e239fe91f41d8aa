"""A web row's identity names the browser build: asked of the binary once per binary file (the answer is kept
by path, size, times and inode, which an upgrade changes), and of a wrapper script every time. A copy of a real
ELF program (coreutils' `true`, which answers --version too) stands for Chromium."""

from __future__ import annotations

import json
import os
import shutil

from deploytool.devices.browser import chromium_build


def test_a_binarys_build_is_asked_once_and_again_when_the_file_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    exe = tmp_path / "chromium"
    true = shutil.which("true")
    assert true is not None
    shutil.copy2(true, exe)
    first = chromium_build(exe)
    assert first.startswith("true (GNU coreutils)"), first
    kept = tmp_path / "cache" / "deploytool" / "chromium-builds.json"
    (stamp,) = json.loads(kept.read_text())
    kept.write_text(json.dumps({stamp: "Chromium 1.2.3"}))  # what a kept answer says is what a second call says
    assert chromium_build(exe) == "Chromium 1.2.3"
    st = exe.stat()
    os.utime(exe, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # an upgrade rewrites the file
    assert chromium_build(exe) == first


def test_a_wrapper_script_is_asked_every_time(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    script = tmp_path / "chromium"
    script.write_text("#!/bin/sh\necho Chromium 7.0\n")
    script.chmod(0o755)
    assert chromium_build(script) == "Chromium 7.0"
    assert not (tmp_path / "cache" / "deploytool" / "chromium-builds.json").exists()


def test_a_killed_runs_browser_config_home_is_removed_at_the_next_launch_and_a_live_ones_is_kept(tmp_path, monkeypatch):
    """A deploytool process killed with SIGKILL cannot remove its browser's config home; the next launch does: a
    folder whose launching process is gone and that no live process names. A live process's folder, another
    program's, and one of an older version (no pid in its name) stay."""
    import subprocess
    import sys
    import tempfile

    from deploytool.devices.browser import CONFIG_PREFIX, sweep_stale_config_homes

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(done.stdout)  # a process that has exited: its pid is free
    dead = tmp_path / f"{CONFIG_PREFIX}{dead_pid}-abc123"
    (dead / "chromium" / "Crash Reports").mkdir(parents=True)
    live = tmp_path / f"{CONFIG_PREFIX}{os.getpid()}-def456"
    older = tmp_path / f"{CONFIG_PREFIX}x1y2z3"
    other = tmp_path / "someone-else-1-abc"
    for folder in (live, older, other):
        folder.mkdir()
    named = tmp_path / f"{CONFIG_PREFIX}{dead_pid}-named"  # its browser's crash handler still runs, naming it
    named.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", str(named)])
    try:
        assert sweep_stale_config_homes() == [dead]
    finally:
        holder.kill()
        holder.wait()
    assert not dead.exists() and live.is_dir() and older.is_dir() and other.is_dir() and named.is_dir()
    assert sweep_stale_config_homes() == [named]  # once nothing names it
