"""Reproduce a deploytool browser finding in headless Chromium with the browser library alone (no deploytool).

    npm install                      # package.json pins the library versions that ran
    pip install playwright           # drives a Chromium already on this machine (nothing is downloaded)
    python reproduce_web.py [--node-modules DIR] [--chromium PATH]
                                     # exit 1: the fault reproduces; 0: it does not

Copied verbatim into a browser row's bug bundle. It serves this folder (and the npm packages) on 127.0.0.1 only,
opens reproduce_web.html in headless Chromium, waits for the page's verdict and prints it.
"""

import argparse
import functools
import http.server
import json
import os
import shutil
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
TYPES = {".wasm": "application/wasm", ".js": "text/javascript", ".mjs": "text/javascript", ".json": "application/json",
         ".bin": "application/octet-stream", ".onnx": "application/octet-stream",
         ".tflite": "application/octet-stream", ".html": "text/html"}
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         "--disable-dev-shm-usage", '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1']


class Handler(http.server.SimpleHTTPRequestHandler):
    """This folder, with /node_modules/ from wherever the packages are; cross-origin isolated (as the libraries
    expect for their wasm); nothing outside the two folders."""

    node_modules: Path = HERE / "node_modules"

    def translate_path(self, path):
        rel = path.split("?", 1)[0].split("#", 1)[0].lstrip("/")
        root, rel = (self.node_modules, rel[len("node_modules/"):]) if rel.startswith("node_modules/") else (HERE, rel)
        target = (root / rel).resolve()
        if root.resolve() not in target.parents and target != root.resolve():
            return str(HERE / "__outside__")
        if not target.exists() and "/tfjs-tflite/dist/" in str(target):  # its wasm files, beside its script
            target = target.parent.parent / "wasm" / target.name
        return str(target)

    def guess_type(self, path):
        return TYPES.get(Path(path).suffix, "application/octet-stream")

    def end_headers(self):
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        # Cacheable, as most servers answer: TF.js reads no shard until every shard has answered, and Chromium
        # keeps a no-store answer's unread body on its connection, so a model of over 6 shards never loaded
        super().end_headers()

    def log_message(self, *args):
        pass


def chromium(given):
    for c in (given, os.environ.get("CHROMIUM"), "/usr/lib/chromium/chromium", shutil.which("chromium"),
              shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if c and Path(c).exists():
            return c
    raise SystemExit("no Chromium found: pass --chromium PATH")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--node-modules", default=str(HERE / "node_modules"), help="where `npm install` put the packages")
    ap.add_argument("--chromium", default=None, help="the Chromium binary (default: the system's)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the page's verdict")
    args = ap.parse_args()
    Handler.node_modules = Path(args.node_modules).resolve()
    if not Handler.node_modules.is_dir():
        raise SystemExit(f"{Handler.node_modules}: no npm packages; run `npm install` here first")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    from playwright.sync_api import sync_playwright

    cfg = json.loads((HERE / "web.json").read_text())
    flags = FLAGS + (["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"] if cfg["backend"] == "webgpu" else [])
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(args.chromium), args=flags, headless=True)
            page = browser.new_page()
            console = []
            page.on("console", lambda m: console.append(m.text) if m.type in ("error", "warning") else None)
            page.goto(f"http://127.0.0.1:{server.server_port}/reproduce_web.html")
            page.wait_for_function("window.reproduction !== undefined", timeout=args.timeout * 1000)
            result = page.evaluate("window.reproduction")
            print(f"browser: {browser.version}")
            browser.close()
    finally:
        server.shutdown()
    for line in console:
        print(f"console: {line}")
    print(json.dumps(result, indent=2))
    if "error" in result and "backends" not in result:
        print("the reproducer itself failed")
        return 2
    print(("REPRODUCED: " if result["reproduced"] else "not reproduced: ") + describe(cfg, result))
    return 1 if result["reproduced"] else 0


def describe(cfg, result):
    b = result["backends"][cfg["backend"]]
    where = f"{cfg['library']} on {cfg['backend']}"
    if "error" in b:
        return f"{where} fails to {'load' if b['stage'] == 'load' else 'run'} the model: {b['error']}"
    limits = cfg["limits"]
    bounds = [f"agreement >= {limits['agreement']}"] + \
        ([f"max |difference| <= {limits['max_abs_error']}"] if limits["max_abs_error"] < 1e30 else [])
    return (f"{where}: top-1 agreement with the source model {b['agreement']:.2%}, max |difference| "
            f"{b['max_abs_error']:.3g} (pass limits: {', '.join(bounds)})")


if __name__ == "__main__":
    sys.exit(main())
