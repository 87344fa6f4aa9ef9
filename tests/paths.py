"""Where the shared real samples live: read in place, never copied into the project.

Beside the checkout (``../shared/samples``), or where PYPTO_SAMPLES_DIR points (a git worktree elsewhere)."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = Path(os.environ.get("PYPTO_SAMPLES_DIR") or (REPO.parent / "shared" / "samples")).resolve()
