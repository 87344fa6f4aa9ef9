"""ECharts options for the pages, built with pyecharts (or plain dicts where pyecharts adds nothing).

The options travel to the page through ``json_script`` (escaped JSON in a script tag of type
application/json) and are started by frontend/static/frontend/js/charts.js, which also installs a tooltip
formatter that escapes every string: names here come from uploaded profiles and are untrusted. No JsCode.
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.utils.translation import gettext as _
from pyecharts import options as opts
from pyecharts.charts import Bar, Line

from analysis.texts import page_language
from pypto_core.attribution import BUCKET_WORDS
from pypto_core.i18n import render

_INIT = opts.InitOpts(animation_opts=opts.AnimationOpts(animation=False))


def _dump(chart: Any) -> dict[str, Any]:
    return json.loads(chart.dump_options())


def _truncate_category_labels(option: dict[str, Any], width: int = 160) -> None:
    """Long op names on a category axis: cut to ``width`` px (pyecharts' LabelOpts has no width)."""
    for axis in option.get("yAxis", []):
        if axis.get("type") == "category" or axis.get("data"):
            axis.setdefault("axisLabel", {}).update({"width": width, "overflow": "truncate"})


# Up to this many legend entries wrap onto several lines (charts.js moves the plot to make room); a longer
# legend scrolls, its first entries the ones to read first. A paged legend hid series behind its arrows.
LEGEND_WRAP_MAX = 12


def legend(names: list[str], **position: Any) -> dict[str, Any]:
    """A legend at ``position`` (ECharts top/bottom/left): every entry in view where there are at most
    ``LEGEND_WRAP_MAX``, else scrolled."""
    return {"type": "plain" if len(names) <= LEGEND_WRAP_MAX else "scroll", "data": names, **position}


def op_type_chart(op_types: list[dict[str, Any]], limit: int = 15) -> dict[str, Any]:
    """Horizontal bars: device time per op type (ms), largest at the top."""
    rows = list(reversed(op_types[:limit]))
    bar = (
        Bar(init_opts=_INIT)
        .add_xaxis([r["op_type"] for r in rows])
        .add_yaxis(_("Device time (ms)"), [round(r["time_us"] / 1e3, 3) for r in rows],
                   label_opts=opts.LabelOpts(is_show=False))
        .reversal_axis()
        .set_global_opts(
            tooltip_opts=opts.TooltipOpts(trigger="axis"),
            legend_opts=opts.LegendOpts(is_show=False),
            xaxis_opts=opts.AxisOpts(name="ms"),
        )
    )
    out = _dump(bar)
    _truncate_category_labels(out)
    out["grid"] = {"left": 170, "right": 40, "top": 20, "bottom": 30}
    return out


def decode_chart(decode: dict[str, Any]) -> dict[str, Any]:
    """Per-token latency (ms) over decode steps."""
    line = (
        Line(init_opts=_INIT)
        .add_xaxis([str(s) for s in decode.get("steps", [])])
        .add_yaxis(_("Per-token latency (ms)"), [round(v, 4) for v in decode.get("latency_ms", [])],
                   is_symbol_show=len(decode.get("steps", [])) < 200,
                   label_opts=opts.LabelOpts(is_show=False))
        .set_global_opts(
            tooltip_opts=opts.TooltipOpts(trigger="axis"),
            legend_opts=opts.LegendOpts(is_show=False),
            xaxis_opts=opts.AxisOpts(name=_("step")),
            yaxis_opts=opts.AxisOpts(name="ms", is_scale=True),
        )
    )
    out = _dump(line)
    out["grid"] = {"left": 60, "right": 50, "top": 30, "bottom": 40}
    return out


def _pow10_floor(v: float) -> float:
    return float(10 ** math.floor(math.log10(v)))


def _pow10_ceil(v: float) -> float:
    return float(10 ** math.ceil(math.log10(v)))


# Bubble sizes in px: the largest op's bubble stays small enough that its neighbours still show.
ROOFLINE_SYMBOL_MIN, ROOFLINE_SYMBOL_MAX = 5, 18


def roofline_chart(roof: dict[str, Any]) -> dict[str, Any]:
    """Achieved FLOP/s (TFLOP/s) against arithmetic intensity (FLOP/byte), log-log, under the SKU's roofs.

    Both log axes start and end on powers of 10 (an end at 737.275 read as a tick); the legend sits under
    the plot, where it covers neither axis name; an empty diamond series names the points above the HBM
    roof in the legend."""
    points = roof.get("points", [])
    peak = float(roof.get("peak_flops_per_s") or 0) / 1e12
    bw = float(roof.get("hbm_bytes_per_s") or 0) / 1e12
    xs = [p["intensity"] for p in points if p.get("intensity")]
    ridge_given = float(roof.get("ridge_flop_per_byte") or 0)
    # an unknown device has no ridge (older page data stored it as NaN): the axis spans the points
    ridge_x = ridge_given if math.isfinite(ridge_given) and ridge_given > 0 else 100.0
    lo = _pow10_floor(min(xs + [0.1]) / 4)
    hi = _pow10_ceil(max(xs + [ridge_x]) * 4)
    roof_line: list[list[float]] = []
    if peak and bw:
        ridge = peak / bw
        steps = 40
        for i in range(steps + 1):
            x = lo * (hi / lo) ** (i / steps)
            roof_line.append([x, min(peak, bw * x)])
        roof_line.append([ridge, peak])
        roof_line.sort()
    by_type: dict[str, list[Any]] = {}
    above = 0
    for p in points:
        point: dict[str, Any] = {"value": [p["intensity"], p["flops_per_s"] / 1e12, p["total_us"]],
                                 "name": f'{p["op_type"]} {p["shape"]}'}
        if p.get("above_hbm_roof"):  # its tensors stayed in L2: drawn apart, said in the tooltip
            point["symbol"] = "diamond"
            point["name"] += " · " + _("above the HBM roof (in the L2 cache)")
            above += 1
        by_type.setdefault(p["op_type"], []).append(point)
    biggest = max((p["total_us"] for p in points), default=1.0) or 1.0
    series: list[dict[str, Any]] = [{
        "type": "line", "name": _("Roof (peak FLOP/s, HBM bandwidth)"), "data": roof_line,
        "showSymbol": False, "lineStyle": {"color": "#888", "type": "dashed"}, "tooltip": {"show": False},
        "silent": True,
    }]
    span = ROOFLINE_SYMBOL_MAX - ROOFLINE_SYMBOL_MIN
    for op_type, data in list(by_type.items())[:20]:
        for d in data:
            d["symbolSize"] = round(ROOFLINE_SYMBOL_MIN + span * math.sqrt(d["value"][2] / biggest), 1)
        series.append({"type": "scatter", "name": op_type, "data": data, "symbol": "circle",
                       "itemStyle": {"opacity": 0.75}})  # overlapping bubbles stay visible
    if above:  # a legend entry for the diamond shape; it has no points of its own
        series.append({"type": "scatter", "name": _("above the HBM roof (in the L2 cache)"), "data": [],
                       "symbol": "diamond", "itemStyle": {"color": "#555"}, "silent": True})
    ys = [d["value"][1] for s in series[1:] for d in s["data"] if d["value"][1] > 0]
    ys += [y for _x, y in roof_line if y > 0]
    y_axis: dict[str, Any] = {"type": "log", "name": "TFLOP/s", "nameLocation": "end",
                              "nameTextStyle": {"align": "left"}}
    if ys:
        y_axis.update({"min": _pow10_floor(min(ys)), "max": _pow10_ceil(max(ys))})
    # the roof and the diamond first: at the end of a long scrolled legend the diamond went unseen
    legend_order = [series[0]["name"]] + [s["name"] for s in series[1:] if s.get("symbol") == "diamond"] + \
        [s["name"] for s in series[1:] if s.get("symbol") != "diamond"]
    return {
        "animation": False,
        "legend": legend(legend_order, bottom=0, left="center"),
        "tooltip": {"trigger": "item"},
        "grid": {"left": 70, "right": 30, "top": 40, "bottom": 80},
        "xAxis": {"type": "log", "name": _("FLOP/byte"), "nameLocation": "middle", "nameGap": 28, "min": lo,
                  "max": hi},
        "yAxis": y_axis,
        "series": series,
    }


HISTORY_LOG_SPAN = 100  # the largest time over the smallest above which the history's time axis is log


def history_chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-token latency (ms) and tokens/s of the project's ready profiles, oldest first, and the step time of
    those that count no tokens.

    A category axis, one slot per profile ("#id name"): on a time axis, profiles uploaded seconds apart
    crowded into one spot with overlapping time labels."""
    labels = [f'#{r["id"]} {r["name"]}' for r in rows]
    lat = [[label, r["per_token_ms"], r["name"]] for label, r in zip(labels, rows)
           if r.get("per_token_ms") is not None]
    tps = [[label, r["tokens_per_s"], r["name"]] for label, r in zip(labels, rows)
           if r.get("tokens_per_s") is not None]
    steps = [[label, r["step_time_ms"], r["name"]] for label, r in zip(labels, rows)
             if r.get("step_time_ms") is not None]
    # a project's runs can be a 3 ms decode token and a 13 s Triton step: on a linear scale every other point
    # sat on 0, so times spanning more than HISTORY_LOG_SPAN read on a log scale
    times = [p[1] for p in lat + steps if p[1] and p[1] > 0]
    log_scale = bool(times) and max(times) / min(times) > HISTORY_LOG_SPAN
    left: dict[str, Any] = {"type": "log", "logBase": 10} if log_scale else {"type": "value", "scale": True}
    return {
        "animation": False,
        "legend": {"top": 0},
        "tooltip": {"trigger": "item"},
        "grid": {"left": 60, "right": 60, "top": 40, "bottom": 60},
        # the axes say what they plot: each slot is a profile by its id and name, each scale its unit
        "xAxis": {"type": "category", "data": labels, "boundaryGap": False,
                  "name": _("Profile (#id name), oldest first"), "nameLocation": "middle", "nameGap": 36,
                  "axisLabel": {"width": 110, "overflow": "truncate", "hideOverlap": True}},
        "yAxis": [{**left, "name": _("Per-token latency or step time (ms)"),
                   "nameTextStyle": {"align": "left"}},
                  {"type": "value", "name": _("Tokens/s"), "scale": True,
                   "nameTextStyle": {"align": "right"}}],
        "series": [
            {"type": "line", "name": _("Per-token latency (ms)"), "data": lat, "yAxisIndex": 0,
             "showSymbol": len(rows) <= 100},
            {"type": "line", "name": _("Tokens/s"), "data": tps, "yAxisIndex": 1,
             "showSymbol": len(rows) <= 100},
            # runs that count no tokens: their median step, on the same ms scale
            {"type": "scatter", "name": _("Step time, runs without tokens (ms)"), "data": steps,
             "yAxisIndex": 0},
        ],
    }


def op_diff_chart(ops: list[dict[str, Any]], unit: str, us_per_unit: float = 1.0, tip_unit: str = "µs",
                  limit: int = 15) -> dict[str, Any]:
    """Before/after device time per op type (the largest changes), grouped bars, in ``tip_unit``
    (``us_per_unit`` µs each: the unit the page's tables print these times in); ``unit`` names the axis
    ("ms per step")."""
    rows = list(reversed(ops[:limit]))

    def scaled(us: float) -> float:
        return _significant(us / us_per_unit, 4)

    bar = (
        Bar(init_opts=_INIT)
        .add_xaxis([r["op_type"] for r in rows])
        .add_yaxis(_("Baseline"), [scaled(r["base_us"]) for r in rows],
                   label_opts=opts.LabelOpts(is_show=False))
        .add_yaxis(_("Candidate"), [scaled(r["new_us"]) for r in rows],
                   label_opts=opts.LabelOpts(is_show=False))
        .reversal_axis()
        .set_global_opts(
            tooltip_opts=opts.TooltipOpts(trigger="axis"),
            xaxis_opts=opts.AxisOpts(name=unit),
        )
    )
    out = _dump(bar)
    _truncate_category_labels(out)
    for entry in out.get("legend", []):
        entry.update({"top": 0, "left": "center"})  # above the plot: at the bottom it covers the axis labels
    out["grid"] = {"left": 170, "right": 60, "top": 30, "bottom": 30}
    out["pyptoUnit"] = tip_unit  # charts.js prints it after each value of the tooltip
    return out


# -- where the time goes (pypto_core/attribution.py: seven exclusive buckets that add up to wall time) -----
TIME_BUCKETS: tuple[str, ...] = ("compute", "communication_not_overlapped", "memcpy", "sync_wait",
                                 "data_loading", "host_launch_bound", "idle_other")
# Fixed colours, the same on every page: compute blue, communication red, copies amber, the host-side idle
# buckets purple / teal / magenta, and plain idle grey.
BUCKET_COLOURS: dict[str, str] = {
    "compute": "#3b7dd8", "communication_not_overlapped": "#e4572e", "memcpy": "#f3a712",
    "sync_wait": "#8e44ad", "data_loading": "#17a589", "host_launch_bound": "#c2185b",
    "idle_other": "#b0b7c0",
}
MAX_TIME_BARS = 200  # steps drawn; longer runs are sampled evenly (the page says so)


def bucket_labels() -> dict[str, str]:
    """The buckets' names in the active language (``pypto_core.attribution.BUCKET_WORDS``, the engine's
    words: CANN / msprof-analyze terms in Chinese)."""
    language = page_language()
    return {b: render(BUCKET_WORDS[b], language) for b in TIME_BUCKETS}


def sample_evenly(n: int, limit: int = MAX_TIME_BARS) -> list[int]:
    """Indices of at most ``limit`` items out of ``n``, evenly spread, first and last included."""
    if n <= limit:
        return list(range(n))
    if limit <= 1:
        return [0]
    return sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})


def time_breakdown_chart(bars: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Horizontal stacked bars, one per (label, time_breakdown), stacked by the seven buckets in order (ms).

    The first bar is at the top. Past 30 bars a slider on the axis shows a window of them at a time."""
    labels = bucket_labels()
    categories = [label for label, _tb in bars]
    series = [{
        "type": "bar", "name": labels[b], "stack": "time", "barMaxWidth": 36,
        "itemStyle": {"color": BUCKET_COLOURS[b]},
        "emphasis": {"focus": "series"},
        "data": [round(int(tb.get(b) or 0) / 1e6, 6) for _label, tb in bars],
    } for b in TIME_BUCKETS]
    out: dict[str, Any] = {
        "animation": False,
        "color": [BUCKET_COLOURS[b] for b in TIME_BUCKETS],
        "legend": legend([labels[b] for b in TIME_BUCKETS], top=0),
        "tooltip": {"trigger": "axis", "axisPointer": {"type": "shadow"}},
        "grid": {"left": 80, "right": 40, "top": 36, "bottom": 30},
        "xAxis": {"type": "value", "name": "ms"},
        "yAxis": {"type": "category", "data": categories, "inverse": True,
                  "axisLabel": {"width": 70, "overflow": "truncate"}},
        "series": series,
    }
    if len(categories) > 30:
        end = 30 / len(categories) * 100
        out["dataZoom"] = [{"type": "slider", "yAxisIndex": 0, "start": 0, "end": end, "right": 5,
                            "width": 14, "showDetail": False},
                           {"type": "inside", "yAxisIndex": 0, "start": 0, "end": end}]
    return out


def _significant(x: float, digits: int = 3) -> float:
    """``x`` to ``digits`` significant digits (123.0255 -> 123, 0.05714 -> 0.0571)."""
    return float(f"{x:.{digits}g}") if x else 0.0


# The matrix's colours: a link's bandwidth as a share of the median of its transport's links (cluster.py's
# link_ratings), in three bands [INFERRED: 80% and 50% are where a link reads "as its peers" and "slow"];
# links that are not rated (too small to be timed by bandwidth, or a rank's copy to itself) in two neutral
# colours.
MATRIX_GOOD, MATRIX_SLOW = 80, 50
MATRIX_SMALL, MATRIX_LOCAL = -1, -2  # the colour dimension's value for the two kinds not rated


def communication_matrix_chart(links: list[dict[str, Any]], ranks: list[int]) -> dict[str, Any]:
    """Heatmap of links, source rank by destination rank (msprof's communication matrix): each cell prints
    its bandwidth (GB/s) and is coloured by how fast it is for its transport (the share of the median of
    that transport's links), never by raw GB/s: a pipeline stage's 100-byte send/recv handshake reads
    0.06 GB/s because latency, not bandwidth, times it, and HCCS and RDMA differ by design. Each cell's
    tooltip says its transport, size, time and what its colour means."""
    from pypto_core.cluster import MIN_LINK_MB, link_ratings

    index = {r: i for i, r in enumerate(ranks)}
    ratings = link_ratings(links)
    data: list[dict[str, Any]] = []
    for x in links:
        if x.get("bandwidth_gbps") is None:
            continue
        r = ratings[(x["src"], x["dst"])]
        transport = x.get("transport") or "?"
        head = _("rank %(src)s → rank %(dst)s · %(transport)s") % {"src": x["src"], "dst": x["dst"],
                                                                   "transport": transport}
        moved = _("%(gbps)s GB/s: %(mb)s MB in %(ms)s ms") % {
            "gbps": _significant(x["bandwidth_gbps"]), "mb": _significant(x["size_mb"]),
            "ms": _significant(x["time_ms"])}
        if r["rating"] == "rated" and r["ratio"] is not None:
            code = round(100 * r["ratio"], 1)
            why = (_("%(pct)s%% of the median of the %(n)s %(transport)s links that moved at least "
                     "%(min)s MB (%(ref)s GB/s)")
                   % {"pct": f"{code:.0f}", "n": r["peers"], "transport": transport,
                      "min": f"{MIN_LINK_MB:g}", "ref": _significant(r["reference_gbps"])})
        elif r["rating"] == "local":
            code, why = MATRIX_LOCAL, _("a copy within the rank, not a link between ranks: not rated")
        else:
            code = MATRIX_SMALL
            why = _("moved less than %(min)s MB: its time is latency, not bandwidth, so it is not rated") % {
                "min": f"{MIN_LINK_MB:g}"}
        data.append({"value": [index[x["dst"]], index[x["src"]], _significant(x["bandwidth_gbps"]), code],
                     "tip": "\n".join((head, moved, why))})
    labels = [_("rank %(r)s") % {"r": r} for r in ranks]
    pieces = [
        {"gte": MATRIX_GOOD, "color": "#15803d",
         "label": _("≥ %(pct)s%% of its transport's median") % {"pct": MATRIX_GOOD}},
        {"gte": MATRIX_SLOW, "lt": MATRIX_GOOD, "color": "#f59e0b",
         "label": _("%(lo)s–%(hi)s%% of its transport's median") % {"lo": MATRIX_SLOW, "hi": MATRIX_GOOD}},
        {"gte": 0, "lt": MATRIX_SLOW, "color": "#b91c1c",
         "label": _("< %(pct)s%%: slow for its transport") % {"pct": MATRIX_SLOW}},
        {"value": MATRIX_SMALL, "color": "#cbd5e1",
         "label": _("< %(min)s MB moved: latency-bound, not rated") % {"min": f"{MIN_LINK_MB:g}"}},
        {"value": MATRIX_LOCAL, "color": "#bfdbfe", "label": _("copy within the rank (not rated)")},
    ]
    return {
        "animation": False,
        "tooltip": {"position": "top"},
        "grid": {"left": 70, "right": 30, "top": 20, "bottom": 130},
        "xAxis": {"type": "category", "data": labels, "name": _("to"), "splitArea": {"show": True}},
        "yAxis": {"type": "category", "data": labels, "name": _("from"), "inverse": True,
                  "splitArea": {"show": True}},
        # dimension 3, the share of the transport's median (or a not-rated code); the cell prints dimension 2
        "visualMap": {"type": "piecewise", "dimension": 3, "pieces": pieces, "orient": "vertical",
                      "left": 10, "bottom": 0, "itemWidth": 14, "itemHeight": 10, "itemGap": 4,
                      "textStyle": {"fontSize": 11}},
        "series": [{"type": "heatmap", "name": "GB/s", "data": data,
                    "label": {"show": len(ranks) <= 16, "fontSize": 10},
                    "encode": {"x": 0, "y": 1, "value": 2}}],
    }
