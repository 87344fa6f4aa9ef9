"""Where the shared real samples live: read in place, never copied into the project."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = (REPO.parent / "shared" / "samples").resolve()
