.PHONY: run test setup bench
run:        ## install everything and run the dashboard with a worker and a demo account
	bash scripts/run.sh
test:       ## the whole test suite (PostgreSQL, Redis, real Celery workers, headless Chromium)
	bash scripts/test.sh
setup:
	bash scripts/setup.sh --browser
bench:      ## speed and memory benchmarks, printed as JSON
	bash scripts/setup.sh && .venv/bin/python -m pypto_core bench
