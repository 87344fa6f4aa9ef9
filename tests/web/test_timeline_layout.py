"""The timeline's per-user layout (hidden lanes, folded groups) kept server-side and applied to the window
answer's lanes; the run details endpoint; the lanes filter; membership on every new URL."""

from __future__ import annotations

import json

import pytest

from tests.web.test_pages import world  # noqa: F401  (the fixture: two analysed profiles, three users)

pytestmark = pytest.mark.django_db


def _put(client, url: str, body: dict):
    return client.put(url, data=json.dumps(body), content_type="application/json")


def test_hidden_lanes_are_remembered_per_user_and_profile(client, world) -> None:  # noqa: F811
    p = world["before"]
    url = f"/api/profiles/{p.pk}/timeline/"
    client.force_login(world["viewer"])
    lanes = client.get(url, {"width_px": 500}).json()["lanes"]
    assert all("group" in ln and "hidden" in ln for ln in lanes)
    target = next(ln for ln in lanes if ln["kind"] == "slices" and not ln["hidden"])
    res = _put(client, url + "layout/", {"hidden": [target["id"]], "collapsed": [target["group"]]})
    assert res.status_code == 200 and res.json()["hidden"] == [target["id"]]
    again = client.get(url, {"width_px": 500}).json()
    assert next(ln for ln in again["lanes"] if ln["id"] == target["id"])["hidden"] is True
    assert again["layout"]["collapsed"] == [target["group"]]
    # another member of the project sees the default; another profile is not affected
    client.force_login(world["owner"])
    assert next(ln for ln in client.get(url).json()["lanes"] if ln["id"] == target["id"])["hidden"] is False
    client.force_login(world["viewer"])
    other = client.get(f"/api/profiles/{world['after'].pk}/timeline/layout/").json()
    assert other == {"hidden": [], "shown": [], "collapsed": [], "saved": False}
    # bad input: a clear 400, nothing stored
    bad = _put(client, url + "layout/", {"hidden": ["x"]})
    assert bad.status_code == 400 and "hidden" in bad.json()["layout"]
    assert client.get(url + "layout/").json()["hidden"] == [target["id"]]


def test_lanes_filter_and_run_details(client, world) -> None:  # noqa: F811
    p = world["before"]
    url = f"/api/profiles/{p.pk}/timeline/"
    client.force_login(world["viewer"])
    full = client.get(url, {"width_px": 300}).json()
    slices = [t for t in full["tracks"] if t["kind"] == "slices"]
    one = slices[0]["lane"]
    only = client.get(url, {"width_px": 300, "lanes": str(one)}).json()
    assert [t["lane"] for t in only["tracks"]] == [one] and len(only["lanes"]) == len(full["lanes"])
    assert client.get(url, {"lanes": "a,b"}).status_code == 400
    t = max(slices, key=lambda t: max(t["count"]))
    i = t["count"].index(max(t["count"]))
    run = client.get(url + "run/", {"lane": t["lane"], "depth": t["depth"][i], "start_ns": t["start"][i],
                                    "end_ns": t["start"][i] + t["dur"][i] + 1}).json()
    assert run["count"] == t["count"][i] and sum(n["count"] for n in run["by_count"]) <= run["count"]
    assert client.get(url + "run/", {"lane": t["lane"]}).status_code == 400


def test_new_timeline_urls_are_404_to_non_members(client, world) -> None:  # noqa: F811
    p = world["before"]
    client.force_login(world["stranger"])
    base = f"/api/profiles/{p.pk}/timeline/"
    assert client.get(base + "layout/").status_code == 404
    assert _put(client, base + "layout/", {"hidden": [0]}).status_code == 404
    assert client.get(base + "run/", {"lane": 0, "depth": 0, "start_ns": 0, "end_ns": 10}).status_code == 404
    assert client.get(base + "critical/").status_code == 404


def test_lane_names_follow_the_page_language_and_folded_groups_keep_their_id(client, world) -> None:  # noqa: F811
    p = world["before"]
    url = f"/api/profiles/{p.pk}/timeline/"
    client.force_login(world["viewer"])
    en = client.get(url, {"width_px": 300}).json()["lanes"]
    zh = client.get(url, {"width_px": 300}, HTTP_ACCEPT_LANGUAGE="zh-Hans").json()["lanes"]
    assert [ln["id"] for ln in zh] == [ln["id"] for ln in en]
    assert [ln["group_id"] for ln in zh] == [ln["group"] for ln in en]
    host = next(ln for ln in zh if ln["table"] == "host_ops")
    assert host["group"].startswith("Host 进程 ") and host["name"].startswith("线程 ")
    assert client.get(url, {"width_px": 300, "lang": "zh-Hans"}).json()["lanes"] == zh
    # a group folded in one language stays folded in the other: the layout names it by its id
    _put(client, url + "layout/", {"collapsed": [host["group_id"]]})
    assert client.get(url, HTTP_ACCEPT_LANGUAGE="zh-Hans").json()["layout"]["collapsed"] == [host["group_id"]]
    event = client.get(url + "event/", {"idx": 0, "lang": "zh-Hans"}).json()
    assert not event["group"].startswith(("Host process", "Profiler steps", "Counters"))


def test_critical_path_endpoint(client, world) -> None:  # noqa: F811
    p = world["before"]
    client.force_login(world["viewer"])
    answer = client.get(f"/api/profiles/{p.pk}/timeline/critical/", {"width_px": 800}).json()
    assert answer["available"] is True and answer["steps"]
    seg = answer["segments"]
    assert set(seg) == {"start", "dur", "kind", "lane", "idx", "depth", "step", "count"}
    assert len(seg["start"]) > 0 and {answer["kinds"][k] for k in seg["kind"]} & {"task", "host"}
    first = answer["steps"][0]
    mine = [d for d, s in zip(seg["dur"], seg["step"]) if s == first["step"]]
    assert sum(mine) == first["end_ns"] - first["start_ns"]  # the path covers the step, within the window
    assert client.get(f"/api/profiles/{p.pk}/timeline/critical/", {"start_ns": "x"}).status_code == 400
