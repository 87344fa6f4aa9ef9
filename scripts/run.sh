#!/usr/bin/env bash
# Installs everything, migrates, loads the demo project, and runs the dashboard with a Celery worker.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export DEBUG="${DEBUG:-1}"
PORT="${PORT:-8000}"
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py collectstatic --noinput -v 0
DEMO="$(.venv/bin/python manage.py pypto_demo)"
echo "$DEMO"
CREDENTIALS="$(echo "$DEMO" | sed -n 's/^Demo account: //p')"
# -B: the recovery sweep (analysis/recovery.py) runs in this worker's embedded beat.
.venv/bin/celery -A pypto_web worker -B -Q ingest,diagnose,light --loglevel=INFO --concurrency=2 &
WORKER=$!
trap 'kill $WORKER 2>/dev/null || true' EXIT INT TERM
echo "PyPTO dashboard: http://127.0.0.1:${PORT}/  (${CREDENTIALS})"
.venv/bin/python manage.py runserver "127.0.0.1:${PORT}"
