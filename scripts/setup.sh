#!/usr/bin/env bash
# Installs everything PyPTO needs on a fresh Debian machine, idempotently:
# a virtualenv with the pinned requirements and the project (pip install -e .), ECharts from the npm
# registry (served by the app, never a CDN), and, with --browser, Debian's Chromium for the browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.pypto-installed
if [ ! -f "$stamp" ] || [ requirements.txt -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r requirements.txt
  .venv/bin/pip install -q --no-deps -e .
  touch "$stamp"
fi

if [ ! -f node_modules/echarts/dist/echarts.min.js ] || [ package.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --silent
fi

if [ "${1:-}" = "--browser" ] && [ ! -x /usr/bin/chromium ]; then
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium shellcheck >/dev/null
fi
if [ "${1:-}" = "--browser" ] && ! command -v shellcheck >/dev/null; then
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq shellcheck >/dev/null || true
fi
