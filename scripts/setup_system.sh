#!/usr/bin/env bash
# Install the Debian packages deploytool needs, only those that are missing:
#   chromium          the web target (driven by Playwright, never downloaded by it)
#   adb               the Android target (the real adb server)
#   postgresql        the results store's PostgreSQL tests (a server started by the tests)
# Idempotent: a second run installs nothing and prints nothing.
set -euo pipefail

need=()
command -v chromium >/dev/null 2>&1 || [ -x /usr/lib/chromium/chromium ] || need+=(chromium)
command -v adb >/dev/null 2>&1 || need+=(adb)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v npm >/dev/null 2>&1 || need+=(npm)

[ ${#need[@]} -eq 0 ] && exit 0

echo "setup: installing Debian packages: ${need[*]}"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "setup: need root to install ${need[*]} (apt-get install -y ${need[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
