#!/usr/bin/env bash
# Install deploytool's Python packages into the venv $1 (`make python` calls this; idempotent): torch's CPU
# wheel, requirements.lock, requirements-nodeps.txt without their dependencies, deploytool itself (editable).
#
# With uv (installed into the venv first, pinned), from the indexes, find-links and constraints pip is configured
# with on this machine (pip.conf, $PIP_*), which uv does not read itself: unpacking ~170 wheels takes uv ~10 s where
# pip takes ~67 s on 2 cores. When uv cannot be installed or fails, pip does the same work as before.
set -euo pipefail
VENV=${1:?usage: install_python.sh VENV}
BIN=$VENV/bin
UV_VERSION=0.13.9
PIP=("$BIN/pip" install -q --disable-pip-version-check --no-compile)

with_pip() {
  "${PIP[@]}" torch==2.13.0
  "${PIP[@]}" -r requirements.lock
  "${PIP[@]}" --no-deps -r requirements-nodeps.txt
  "${PIP[@]}" --no-deps --no-build-isolation -e .
}

pip_config() {  # a pip setting as pip reads it (its config files, then the environment), one value per line
  local key=$1 env=$2 value
  value=${!env:-}
  [ -n "$value" ] || value=$("$BIN/pip" config get "global.$key" 2>/dev/null || true)
  tr ' ' '\n' <<<"$value" | sed '/^$/d'
}

with_uv() {
  [ -x "$BIN/uv" ] && "$BIN/uv" --version 2>/dev/null | grep -q " $UV_VERSION\b" || "${PIP[@]}" "uv==$UV_VERSION" || return 1
  local args=(--python "$BIN/python" --no-progress --quiet --index-strategy unsafe-best-match)
  local v
  while read -r v; do args+=(--index-url "$v"); done < <(pip_config index-url PIP_INDEX_URL)
  while read -r v; do args+=(--extra-index-url "$v"); done < <(pip_config extra-index-url PIP_EXTRA_INDEX_URL)
  while read -r v; do args+=(--find-links "$v"); done < <(pip_config find-links PIP_FIND_LINKS)
  while read -r v; do args+=(--constraint "$v"); done < <(pip_config constraint PIP_CONSTRAINT)
  local cert
  cert=$(pip_config cert PIP_CERT | head -1)
  if [ -n "$cert" ]; then export SSL_CERT_FILE=$cert; fi
  "$BIN/uv" pip install "${args[@]}" torch==2.13.0 -r requirements.lock &&
    "$BIN/uv" pip install "${args[@]}" --no-deps -r requirements-nodeps.txt &&
    "$BIN/uv" pip install "${args[@]}" --no-deps --no-build-isolation -e .
}

if ! with_uv; then
  echo "install_python: uv could not install the packages; pip installs them instead" >&2
  with_pip
fi
