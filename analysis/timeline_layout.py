"""A user's arrangement of a profile's timeline (hidden lanes, folded groups): read, write, and applied to
the lanes of a window answer. The caller has checked membership (``profile_get_for_user``)."""

from __future__ import annotations

from typing import Any

from analysis.models import TimelineLayout
from profiles.models import Profile

MAX_ITEMS = 5000  # lanes or groups one layout may name (the CNN 8-NPU sample has 118 lanes)
MAX_GROUP_CHARS = 300


def timeline_layout_get(*, user: Any, profile: Profile) -> dict[str, Any]:
    row = TimelineLayout.objects.filter(user=user, profile=profile).first()
    if row is None:
        return {"hidden": [], "shown": [], "collapsed": [], "saved": False}
    return {"hidden": row.hidden, "shown": row.shown, "collapsed": row.collapsed, "saved": True}


def _lane_ids(values: Any, name: str) -> list[int]:
    if not isinstance(values, list) or len(values) > MAX_ITEMS:
        raise ValueError(f"{name}: a list of at most {MAX_ITEMS} lane ids")
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**7 for v in values):
        raise ValueError(f"{name}: lane ids are non-negative integers")
    return sorted(set(values))


def timeline_layout_set(*, user: Any, profile: Profile, hidden: Any, shown: Any,
                        collapsed: Any) -> dict[str, Any]:
    """Replace the user's layout of ``profile``; ``ValueError`` names the field that is wrong."""
    hidden_ids, shown_ids = _lane_ids(hidden, "hidden"), _lane_ids(shown, "shown")
    if not isinstance(collapsed, list) or len(collapsed) > MAX_ITEMS or not all(
            isinstance(g, str) and len(g) <= MAX_GROUP_CHARS for g in collapsed):
        raise ValueError(f"collapsed: a list of group names of at most {MAX_GROUP_CHARS} characters")
    TimelineLayout.objects.update_or_create(
        user=user, profile=profile,
        defaults={"hidden": hidden_ids, "shown": sorted(set(shown_ids) - set(hidden_ids)),
                  "collapsed": sorted(set(collapsed))})
    return timeline_layout_get(user=user, profile=profile)


def lanes_with_layout(lanes: list[dict[str, Any]], layout: dict[str, list]) -> list[dict[str, Any]]:
    """The answer's lanes with ``hidden`` as this user sees them (the index's default, then their choices)."""
    hidden, shown = set(layout["hidden"]), set(layout["shown"])
    return [{**ln, "hidden_by_default": ln.get("hidden", False),
             "hidden": ln["id"] in hidden or (ln.get("hidden", False) and ln["id"] not in shown)}
            for ln in lanes]
