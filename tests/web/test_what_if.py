"""``POST /api/profiles/{id}/what-if/``: the run replayed with the ticked findings fixed together (the
profile page's "Replay the ticked findings"), the same numbers as ``pypto analyze --what-if``; members
only."""

from __future__ import annotations

import pytest

from pypto_core.rules import diagnose
from tests.core.rules.builders import decoder_profile
from tests.web.helpers import project_with
from tests.web.test_pages import analysed_profile

pytestmark = pytest.mark.django_db
PLANTED = frozenset({"norm_launch_overhead", "matmul_tiling"})


@pytest.fixture
def ready(make_user, tmp_path, settings):
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("owner")
    core = decoder_profile(planted=PLANTED, tokens=3, layers=2, eager_gap_us=40.0)
    return owner, core, analysed_profile(project_with(owner), owner, core, tmp_path, "eager decode")


def test_replay_of_ticked_findings_matches_the_engine(client, ready) -> None:
    owner, core, p = ready
    client.force_login(owner)
    rules = ["host_bound_gaps", "norm_launch_overhead"]
    r = client.post(f"/api/profiles/{p.pk}/what-if/", {"rules": rules}, content_type="application/json")
    assert r.status_code == 200, r.content
    got = r.json()
    expected = diagnose(core, what_if=rules).what_if
    assert got["rules"] == sorted(rules) and got["duration_ns"] == expected["duration_ns"]
    assert 1.0 < got["speedup"] == expected["speedup"] and got["per_token_ms"] == expected["per_token_ms"]
    # the page offers the ticks and the button
    page = client.get(f"/profiles/{p.pk}/").content.decode()
    assert 'id="whatif-run"' in page and 'value="norm_launch_overhead"' in page


def test_unknown_rules_are_refused_and_other_projects_see_nothing(client, ready, make_user) -> None:
    owner, _, p = ready
    client.force_login(owner)
    bad = client.post(f"/api/profiles/{p.pk}/what-if/", {"rules": ["no_such_rule"]},
                      content_type="application/json")
    assert bad.status_code == 400 and "no_such_rule" in bad.json()["rules"]
    empty = client.post(f"/api/profiles/{p.pk}/what-if/", {"rules": []}, content_type="application/json")
    assert empty.status_code == 400
    client.force_login(make_user("stranger"))
    r = client.post(f"/api/profiles/{p.pk}/what-if/", {"rules": ["host_bound_gaps"]},
                    content_type="application/json")
    assert r.status_code == 404


def test_a_profile_without_device_tasks_says_so_in_the_readers_language(client, make_user, tmp_path,
                                                                        settings) -> None:
    from pypto_core.profile import Profile

    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("owner")
    p = analysed_profile(project_with(owner), owner, Profile(), tmp_path, "no device tasks")
    client.force_login(owner)
    got = client.post(f"/api/profiles/{p.pk}/what-if/?lang=zh-Hans", {"rules": ["host_bound_gaps"]},
                      content_type="application/json").json()
    assert got["duration_ns"] is None and got["note"] == "this profile has no device tasks to replay"
    assert got["note_localized"] == "该性能数据中没有可重放的设备侧任务"
