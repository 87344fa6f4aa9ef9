#!/usr/bin/env bash
# Installs what PyPTO needs on a fresh Debian machine, idempotently: a virtualenv with the dashboard's pinned
# requirements and the project (pip install -e .), ECharts from the npm registry (served by the app, never a
# CDN); with --dev the test and benchmark tools too (requirements-dev.txt: torch, transformers, pytest,
# playwright, moto, hypothesis), with --browser Debian's Chromium for the browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."
DEV=""; BROWSER=""
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    --browser) BROWSER=1 ;;
    *) echo "setup.sh: unknown option $arg (--dev, --browser)" >&2; exit 2 ;;
  esac
done

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
dev_stamp=.venv/.pypto-dev-installed
if [ -n "$DEV" ] && { [ ! -f "$dev_stamp" ] || [ requirements-dev.txt -nt "$dev_stamp" ] || \
                       [ requirements.txt -nt "$dev_stamp" ]; }; then
  .venv/bin/pip install -q -r requirements-dev.txt
  touch "$dev_stamp"
fi

if [ ! -f node_modules/echarts/dist/echarts.min.js ] || [ package.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --silent
fi
# Served by the app at static/vendor/echarts/echarts.min.js (frontend/static/vendor/ is git-ignored).
mkdir -p frontend/static/vendor/echarts
if [ ! -f frontend/static/vendor/echarts/echarts.min.js ] || \
   [ node_modules/echarts/dist/echarts.min.js -nt frontend/static/vendor/echarts/echarts.min.js ]; then
  cp node_modules/echarts/dist/echarts.min.js frontend/static/vendor/echarts/echarts.min.js
fi
# Debian packages: installed only when missing, with one `apt-get update` first (a fresh machine has no
# package lists yet).
SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
APT_UPDATED=""
apt_install() {
  if [ -z "$APT_UPDATED" ]; then $SUDO apt-get update -qq; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

# The readers' speed comes from two small C scanners (pypto_core/formats/_csvscan.c, _eventscan.c): a C
# compiler is installed when missing, and they are built now (cached), not during the first ingest.
# Without them the readers still work, several times slower: say so loudly.
command -v cc >/dev/null || apt_install gcc libc6-dev
.venv/bin/python -c "
from pypto_core.formats.csvscan import native_lib
from pypto_core.formats.eventscan import native_scanner
raise SystemExit(0 if native_lib() and native_scanner() else 1)" ||
  echo "pypto setup: WARNING: the C scanners did not build; the readers fall back to pure Python (slow)" >&2

# Translations: compile locale/*/LC_MESSAGES/django.po into the git-ignored django.mo on every run
# (compilemessages skips a .mo newer than its .po); msgfmt comes with gettext.
# tests/web/test_pages_lists.py fails on a stale .mo.
command -v msgfmt >/dev/null || apt_install gettext
# (the engine's own catalog, pypto_core/i18n, is compiled and committed by scripts/engine_messages.py);
# the settings need a key outside DEBUG; compiling the catalogs signs nothing
SECRET_KEY="${SECRET_KEY:-setup-only}" .venv/bin/python manage.py compilemessages -v 0 --ignore=.venv \
  --ignore=node_modules --ignore=pypto_core

if [ -n "$BROWSER" ]; then
  # Debian's Chromium for Playwright (never a browser download) and shellcheck for the AOE script test.
  [ -x /usr/bin/chromium ] || apt_install chromium
  command -v shellcheck >/dev/null || apt_install shellcheck
  # A CJK font, so that Chromium's screenshots of the Chinese pages show text rather than empty boxes.
  if command -v fc-list >/dev/null && [ -z "$(fc-list :lang=zh 2>/dev/null)" ]; then
    apt_install fonts-wqy-microhei || true
  fi
  # `docker compose config` validates docker/compose.yaml in the tests; Debian's docker-compose does it
  # where the compose plugin is not installed (no engine is needed for `config`).
  if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null; then
    apt_install docker-compose || true
  fi
fi
