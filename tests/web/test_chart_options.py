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
