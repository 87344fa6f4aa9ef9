.PHONY: run test setup bench
run:        ## install the dashboard (no test tools) and run it with a worker and a demo account
	bash scripts/run.sh
test:       ## the whole test suite (PostgreSQL, Redis, real Celery workers, headless Chromium)
	bash scripts/test.sh
setup:      ## everything a developer needs: the dashboard, the test tools, Chromium
	bash scripts/setup.sh --dev --browser
bench:      ## speed and memory benchmarks, printed as JSON
	bash scripts/setup.sh --dev && .venv/bin/python -m pypto_core bench
