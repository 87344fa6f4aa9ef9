"""Chart options built in frontend/charts.py, read as the page gets them (no browser)."""

from __future__ import annotations

import math

from frontend.charts import ROOFLINE_SYMBOL_MAX, roofline_chart


def _is_pow10(v: float) -> bool:
    return abs(math.log10(v) - round(math.log10(v))) < 1e-9


def _roof() -> dict:
    points = [
        {"op_type": "MatMulV2", "shape": "[4096,4096]", "intensity": 184.3, "flops_per_s": 2.1e14,
         "total_us": 9000.0},
        {"op_type": "Add", "shape": "[8,4096]", "intensity": 0.17, "flops_per_s": 3.3e11, "total_us": 10.0},
        {"op_type": "RmsNorm", "shape": "[8,4096]", "intensity": 1.2, "flops_per_s": 4e12, "total_us": 50.0,
         "above_hbm_roof": True},
    ]
    return {"points": points, "peak_flops_per_s": 3.5e14, "hbm_bytes_per_s": 1.6e12,
            "ridge_flop_per_byte": 218.75}


def test_roofline_axes_end_on_powers_of_ten_and_legend_is_below() -> None:
    opt = roofline_chart(_roof())
    x, y = opt["xAxis"], opt["yAxis"]
    for v in (x["min"], x["max"], y["min"], y["max"]):
        assert _is_pow10(v), v  # no end tick like 737.275
    assert x["min"] <= 0.17 / 4 and x["max"] >= 218.75 * 4
    assert y["min"] <= 0.33 and y["max"] >= 350
    # the legend sits under the plot (at the top it covered the y axis name, "TFLOP/s" read "FLOP/s")
    assert "top" not in opt["legend"] and opt["legend"]["bottom"] == 0
    assert opt["grid"]["bottom"] >= 70


def test_roofline_legend_shows_the_diamond_and_bubbles_are_capped() -> None:
    opt = roofline_chart(_roof())
    scatter = [s for s in opt["series"] if s["type"] == "scatter"]
    diamonds = [s for s in scatter if s.get("symbol") == "diamond"]
    assert len(diamonds) == 1 and diamonds[0]["data"] == [] and "HBM roof" in diamonds[0]["name"]
    assert opt["legend"]["data"][1] == diamonds[0]["name"]  # on the legend's first page, after the roof
    sizes = [d["symbolSize"] for s in scatter for d in s["data"]]
    assert max(sizes) <= ROOFLINE_SYMBOL_MAX <= 20
    no_above = _roof()
    no_above["points"][2].pop("above_hbm_roof")
    assert not any(s.get("symbol") == "diamond" for s in roofline_chart(no_above)["series"])


def test_a_legend_of_a_few_series_shows_them_all_and_a_long_one_scrolls() -> None:
    """A paged ('scroll') legend hid the time buckets behind its arrows (1/2 in a half-width card): up to
    LEGEND_WRAP_MAX entries the legend is plain (ECharts wraps it; charts.js makes room), a longer one
    scrolls with the entries to read first at its start."""
    from frontend.charts import LEGEND_WRAP_MAX, time_breakdown_chart

    bars = [("step 1", {"wall_ns": 10, "compute": 5, "idle_other": 5})]
    time = time_breakdown_chart(bars)
    assert time["legend"]["type"] == "plain" and len(time["legend"]["data"]) == 7
    assert roofline_chart(_roof())["legend"]["type"] == "plain"
    many = _roof()
    many["points"] += [{**many["points"][1], "op_type": f"Op{i}"} for i in range(LEGEND_WRAP_MAX + 2)]
    legend = roofline_chart(many)["legend"]
    assert legend["type"] == "scroll" and legend["data"][:2] == [
        "Roof (peak FLOP/s, HBM bandwidth)", "above the HBM roof (in the L2 cache)"]


def test_the_comparison_chart_reads_in_the_unit_of_the_tables_beside_it() -> None:
    """The op chart drew µs beside tables that print the same times in ms: it now draws them in the unit the
    tables print the largest in, says it on the axis and after each value of its tooltip."""
    from django.utils import translation

    from frontend.charts import op_diff_chart
    from frontend.views.compare_pages import AXIS_UNIT, chart_unit
    from pypto_core.durations import format_duration

    ops = [{"op_type": "hcom_allReduce_", "base_us": 100_230.0, "new_us": 0.0},
           {"op_type": "MatMulV2", "base_us": 938.0, "new_us": 1_520.0}]
    name, per = chart_unit([t for o in ops for t in (o["base_us"], o["new_us"])])
    assert (name, per) == ("ms", 1000.0) and format_duration(100_230.0, "us").endswith("ms")
    assert chart_unit([12.0, 640.0]) == ("µs", 1.0) and chart_unit([2.5e6]) == ("s", 1e6)
    with translation.override("en"):
        axis = AXIS_UNIT["per_step"] % {"unit": name}
        opt = op_diff_chart(ops, axis, per, name)
        assert opt["xAxis"][0]["name"] == "ms per step" and opt["pyptoUnit"] == "ms"
    base = next(s for s in opt["series"] if s["name"] == "Baseline")
    assert [d if not isinstance(d, dict) else d["value"] for d in base["data"]] == [0.938, 100.2]
    with translation.override("zh-hans"):
        assert str(AXIS_UNIT["per_step"]) % {"unit": "ms"} == "每个迭代的 ms"


def test_a_device_without_known_peaks_draws_its_points_without_a_roof() -> None:
    """An MI250 (no figures known) stored its ridge as NaN, and the profile page answered 500: the chart
    spans the points, draws no roof, and the engine gives 0 for the ridge, never NaN."""
    from pypto_core.hardware import resolve_sku
    from pypto_core.profile import Profile, ProfileMeta

    sku, source = resolve_sku(Profile(meta=ProfileMeta(format="kineto", device="AMD Instinct MI250X")), None)
    assert not sku.known and sku.ridge_flop_per_byte == 0.0, (sku.name, source)
    for stored in (float("nan"), 0.0):
        roof = {**_roof(), "peak_flops_per_s": 0.0, "hbm_bytes_per_s": 0.0, "ridge_flop_per_byte": stored}
        opt = roofline_chart(roof)
        x = opt["xAxis"]
        assert _is_pow10(x["min"]) and _is_pow10(x["max"]) and x["max"] >= 184.3
        assert opt["series"][0]["data"] == []  # no roof without its figures


def test_project_history_reads_runs_of_very_different_lengths_on_a_log_scale() -> None:
    """A 13.3 s Triton step beside 3-150 ms runs set a linear axis to 15,000 ms and every other point on 0."""
    from frontend.charts import history_chart

    rows = [{"id": 1, "name": "cnn", "step_time_ms": 156.0}, {"id": 2, "name": "eager", "per_token_ms": 27.2},
            {"id": 3, "name": "triton", "step_time_ms": 13_300.0}, {"id": 4, "name": "graph",
                                                                     "step_time_ms": 3.5}]
    assert history_chart(rows)["yAxis"][0]["type"] == "log"
    close = [r for r in rows if r["id"] != 3]  # 3.5 to 156 ms: within the span, linear
    assert history_chart(close)["yAxis"][0]["type"] == "value"
