"""The demo account and project that ``manage.py pypto_demo`` (and ``make run``) set up."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.files import File
from django.db import transaction

from analysis.comparisons import comparison_create
from analysis.profile_services import profile_upload
from profiles.models import Membership, Project, Role
from pypto_core.synth import demo_pair

DEMO_USERNAME = "demo"
DEMO_PROJECT = "Demo: Llama inference on 910B"


def load_demo_profiles(project: Project) -> int:
    """Add the simulator's before/after pair (``pypto_core.synth``) to the demo project, and their comparison;
    returns how many profiles were added."""
    if project.profiles.exists():
        return 0  # already loaded: make run is re-runnable
    owner = project.created_by
    if owner is None:
        return 0  # the demo user made it (demo_setup); nobody to upload as
    with tempfile.TemporaryDirectory(prefix="pypto-demo-") as tmp:
        before_dir, after_dir = demo_pair(Path(tmp) / "pair")
        uploaded = []
        pair = (("before: all four anti-patterns", before_dir), ("after: all four fixed", after_dir))
        for label, folder in pair:
            archive = shutil.make_archive(str(Path(tmp) / folder.name), "zip", root_dir=folder.parent,
                                          base_dir=folder.name)
            with open(archive, "rb") as fh:
                uploaded.append(profile_upload(project=project, user=owner, file=File(fh),
                                               filename=f"{label.split(':')[0]}_{folder.name}.zip",
                                               name=f"llama2-7b 910B3 (simulated) {label}", sku="910B3",
                                               tags=["demo", "simulated"]))
    # the comparison waits in the queue until both profiles are ready
    comparison_create(user=owner, base=uploaded[0], candidate=uploaded[1])
    return len(uploaded)


@transaction.atomic
def demo_setup(*, password: str | None = None) -> tuple[str, str, Project]:
    """Create or refresh the demo user (new password each time unless given) and its project."""
    password = password or secrets.token_urlsafe(9)
    users = get_user_model()
    user, _created = users.objects.get_or_create(username=DEMO_USERNAME, defaults={"email": ""})
    user.set_password(password)
    user.is_active = True
    user.save()
    project = Project.objects.filter(name=DEMO_PROJECT, memberships__user=user).first()
    if project is None:
        project = Project.objects.create(
            name=DEMO_PROJECT,
            description="Simulated profiles (marked simulated) showing each anti-pattern and its fix.",
            created_by=user,
        )
    Membership.objects.get_or_create(project=project, user=user, defaults={"role": Role.OWNER})
    return DEMO_USERNAME, password, project
