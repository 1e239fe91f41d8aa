"""Devices a Target talks to: Android phones over ADB (adb.py), headless Chromium (browser.py) and the local server the browser fetches from (harness_server.py)."""
