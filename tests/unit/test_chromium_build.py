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
