"""Run the ADB device simulator (a TEST DOUBLE) until Ctrl-C, attached to the
adb server on $ANDROID_ADB_SERVER_PORT (or --adb-port), so the CLI can be tried
end to end without a phone:

    cd tests && python -m android_sim --adb-port 5037
    DEPLOYTOOL_BENCHMARK_MODEL=tests/android_sim/benchmark_model_double.py \\
        deploytool migrate --model lenet5 --target android --device 127.0.0.1:PORT
"""

from __future__ import annotations

import argparse
import os
import signal
import threading

from . import BENCHMARK_MODEL_DOUBLE, DeviceSimulator, wait_for_state


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m android_sim", description=__doc__.splitlines()[0])
    ap.add_argument("--adb-port", type=int, default=int(os.environ.get("ANDROID_ADB_SERVER_PORT", "5037")))
    ap.add_argument("--mode", choices=("device", "unauthorized", "offline"), default="device")
    args = ap.parse_args()
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(args.adb_port)
    from adbutils import AdbClient

    client = AdbClient(port=args.adb_port)
    sim = DeviceSimulator(mode=args.mode).start()
    try:
        client.connect(sim.serial, timeout=2)
    except Exception:
        pass
    wait_for_state(client, sim.serial, (args.mode,))
    print(f"simulated phone (test double) attached as {sim.serial} to the adb server on port {args.adb_port}")
    print(f"its /data/local/tmp is {sim.root}")
    print(f"benchmark_model test double: {BENCHMARK_MODEL_DOUBLE}")
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    client.disconnect(sim.serial)
    sim.stop()


if __name__ == "__main__":
    main()
