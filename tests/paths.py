"""Where the shared real samples live: read in place, never copied into the project.

``$PYPTO_SAMPLES`` names the folder; otherwise ``../shared/samples`` beside the checkout. Without either, the
tests that read them are reported skipped with one line that says how to get them (tests/conftest.py,
``scripts/fetch-samples.sh``).
"""

import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = Path(os.environ.get("PYPTO_SAMPLES") or REPO.parent / "shared" / "samples").resolve()
HAVE_SAMPLES = (SAMPLES / "SOURCES.md").is_file()
MISSING_SAMPLES = ("needs the real samples, not found at "
                   f"{os.environ.get('PYPTO_SAMPLES') or '../shared/samples'}: "
                   "set PYPTO_SAMPLES or run scripts/fetch-samples.sh")


def sample_cases(values: list[Any]) -> list[Any]:
    """Parameters read from the samples; without them one case, skipped with the line that says how to get
    them (an empty parameter set would skip without saying what is missing)."""
    if HAVE_SAMPLES:
        return values
    return [pytest.param(None, marks=pytest.mark.skip(reason=MISSING_SAMPLES), id="samples-missing")]
