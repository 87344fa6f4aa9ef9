"""Small helpers for the web tests: archives of real
samples, projects with members, waiting for the pipeline."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path
from typing import Any

from tests.conftest import Worker, wait_until
from tests.paths import SAMPLES

# Small real samples (SOURCES.md): quick to parse on a busy 2-core machine.
SMALL_RANK = SAMPLES / "ascend_pt" / "trimmed_2023_memoryl0" / "test_rank_0"
SMALL_CSV = SAMPLES / "ascend_pt" / "level0_excerpt" / "kernel_details.csv"


def zip_folder(src: Path, dest: Path) -> Path:
    """Zip a sample folder (read in place) the way a user would: the folder itself at the top."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(src.rglob("*")):
            if path.is_file():
                zf.write(path, f"{src.name}/{path.relative_to(src).as_posix()}")
    return dest


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def project_with(owner: Any, **members: Any) -> Any:
    """A project owned by ``owner`` with extra members by role: ``project_with(a, viewer=b)``."""
    from profiles.models import Membership
    from profiles.services import project_create

    project = project_create(user=owner, name=f"{owner.username}'s project")
    for role, user in members.items():
        Membership.objects.create(project=project, user=user, role=role)
    return project


def wait_finished(profile_id: int, worker: Worker | None = None) -> Any:
    """Poll the row until the pipeline ends (ready or failed); returns the fresh row."""
    from profiles.models import Profile

    def finished() -> Any:
        p = Profile.objects.get(pk=profile_id)
        return p if p.status in ("ready", "failed") else None

    return wait_until(finished, f"profile {profile_id} to finish", worker)


def stored_archive_sha256(profile: Any) -> str:
    with profile.archive.open("rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()
