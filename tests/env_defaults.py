"""Loaded with ``-p`` (pyproject addopts) before pytest-django reads the settings: the suite runs with
DEBUG=0, and the settings refuse to load without a SECRET_KEY unless DEBUG (issue 17). A key of the suite's
own, unless the caller set one; the workers the tests start inherit it."""

import os

os.environ.setdefault("SECRET_KEY", "test-suite-only-" + "k" * 48)
