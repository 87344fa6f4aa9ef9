"""``manage.py pypto_demo``: the demo account with a printed password that works, and its project."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_pypto_demo_prints_working_credentials_and_is_rerunnable() -> None:
    from profiles.models import Membership

    out = StringIO()
    call_command("pypto_demo", stdout=out)
    match = re.search(r"Demo account: user (\S+)  password (\S+)", out.getvalue())
    assert match, out.getvalue()
    user = authenticate(username=match.group(1), password=match.group(2))
    assert user is not None
    membership = Membership.objects.get(user=user)
    assert membership.role == "owner"

    again = StringIO()
    call_command("pypto_demo", "--password", "chosen-pass-123", stdout=again)
    assert authenticate(username="demo", password="chosen-pass-123") is not None
    assert authenticate(username="demo", password=match.group(2)) is None  # the old one no longer works
    assert Membership.objects.filter(user=user).count() == 1  # same project, not a second one
