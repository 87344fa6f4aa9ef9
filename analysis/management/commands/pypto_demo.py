"""``manage.py pypto_demo``: the demo account (printed password) and its project."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand

from analysis.demo import demo_setup, load_demo_profiles


class Command(BaseCommand):
    help = "Create (or refresh) the demo user and demo project, and print the credentials."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--password", default=os.environ.get("PYPTO_DEMO_PASSWORD", ""),
                            help="use this password instead of a fresh random one")

    def handle(self, *args: Any, **options: Any) -> None:
        username, password, project = demo_setup(password=options["password"] or None)
        added = load_demo_profiles(project)
        self.stdout.write(f"Demo account: user {username}  password {password}")
        self.stdout.write(f"Demo project: {project.name} (id {project.pk}), {added} simulated profiles added")
