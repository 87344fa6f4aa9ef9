"""Where the shared real samples live: read in place, never copied into the project."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Beside the checkout (../shared/samples); a git worktree elsewhere names the folder with PYPTO_SAMPLES.
SAMPLES = Path(os.environ.get("PYPTO_SAMPLES") or REPO.parent / "shared" / "samples").resolve()
