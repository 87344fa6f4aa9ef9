#!/usr/bin/env bash
# The whole test suite against real PostgreSQL and Redis, with real Celery workers and headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev --browser
bash scripts/services.sh
export DATABASE_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/pypto}"
export CELERY_BROKER_URL="${TEST_CELERY_BROKER_URL:-redis://127.0.0.1:6379/15}"
export PYPTO_VAR_DIR="${PYPTO_VAR_DIR:-$PWD/var/test}"
export DEBUG=0
mkdir -p "$PYPTO_VAR_DIR/staticfiles"
set +e
# Two processes by default (PYTEST_PROCESSES=0 runs in one): much of the suite waits on workers, browsers
# and subprocesses, so the second core is otherwise idle. Whole files go to one process (their fixtures).
.venv/bin/python -m pytest -n "${PYTEST_PROCESSES:-2}" --dist loadfile "$@"
rc=$?
set -e
# pytest's "no tests collected" is a failure here: the suite must run something.
exit $rc
