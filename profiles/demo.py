"""The demo account and project that ``manage.py pypto_demo`` (and ``make run``) set up."""

from __future__ import annotations

import importlib.util
import secrets

from django.contrib.auth import get_user_model
from django.db import transaction

from profiles.models import Membership, Project, Role

DEMO_USERNAME = "demo"
DEMO_PROJECT = "Demo: Llama inference on 910B"


def load_demo_profiles(project: Project) -> int:
    """Add simulated profiles to the demo project; returns how many were added.

    Hook for the simulator's issue (pypto_core.synth): does nothing until that module exists.
    """
    if importlib.util.find_spec("pypto_core.synth") is None:
        return 0
    return 0


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
