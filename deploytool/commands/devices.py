"""`deploytool devices`: the Android devices the adb server sees, and what each needs to be usable."""

from __future__ import annotations

import argparse

from deploytool.devices import adb


def run(args: argparse.Namespace) -> int:
    print(adb.format_device_table(adb.describe_devices()))
    return 0
