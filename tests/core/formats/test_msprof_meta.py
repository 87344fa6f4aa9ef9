"""msprof folders: device info.json.N (chip, device id, simulated mark), README.txt's simulated mark,
step_trace_*.csv with Iteration ID rows, and the device id taken from the kernels' Device_id column."""

import json
import shutil

import pytest

from pypto_core.formats import open_profile
from pypto_core.formats.msprof import read_device_info
from pypto_core.profile import ProfileMeta
from pypto_core.synth import synthesize
from tests.paths import SAMPLES

OP_SUMMARY = SAMPLES / "msprof" / "op_summary_fixture" / "op_summary_1.csv"
PROF = "PROF_000001_20260323031749197_00815596RKPKAHRB"
# Real info.json.N keys, from msprof's writer [SRC hicann/runtime info_json.cpp]; no chip_name.
REAL_INFO = {"DeviceInfo": [{"id": 3, "env_type": 3, "ai_core_num": 24, "aiv_num": 48,
                             "aic_frequency": "1800", "hwts_frequency": "50",
                             "ctrl_cpu_id": "ARMv8_Cortex_A55"}],
             "platform_version": "5", "rank_id": -1, "cannVersion": "8.3.RC1", "pid": 1234}
STEP_HEADER = ("Device_id,Iteration ID,FP Start(us),BP End(us),Iteration End(us),Iteration Time(us),"
               "FP to BP Time(us),Iteration Refresh(us),Data Aug Bound(us),Model ID,"
               "Reduce Start(us),Reduce Duration(us),Reduce Start(us),Reduce Duration(us)\n")


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    run_dir = synthesize(out, layout="msprof", tokens=2)
    return run_dir, open_profile(out)


def _real_layout(tmp_path, info=REAL_INFO, step_rows=None):
    """A PROF_* folder around the real op_summary sample, with a device info.json.N like msprof writes."""
    root = tmp_path / PROF
    out = root / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    shutil.copy(OP_SUMMARY, out / "op_summary_20260323031749.csv")
    if info is not None:
        dev = root / f"device_{info['DeviceInfo'][0]['id']}"
        dev.mkdir()
        (dev / f"info.json.{info['DeviceInfo'][0]['id']}").write_text(json.dumps(info), encoding="utf-8")
    if step_rows is not None:
        (out / "step_trace_20260323031749.csv").write_text(STEP_HEADER + "".join(step_rows), encoding="utf-8")
    return root


def test_simulated_msprof_is_marked_with_chip_and_device(simulated):
    _, prof = simulated
    assert prof.meta.format == "msprof"
    assert prof.meta.simulated is True
    assert prof.meta.device == "Ascend910B3" and prof.meta.device_id == 0
    assert prof.meta.extra["device_info"]["0"]["ai_core_num"] == 20
    assert any(f.endswith("device_0/info.json.0") for f in prof.meta.source_files)


def _us_to_ns(cell: str) -> int:
    """Exact µs text → ns by string arithmetic, independent of the reader under test."""
    whole, _, frac = cell.strip().partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def test_simulated_msprof_steps_come_from_step_trace(simulated):
    run_dir, prof = simulated
    step_csv = next(run_dir.glob("mindstudio_profiler_output/step_trace_*.csv"))
    header, *lines = step_csv.read_text(encoding="utf-8").splitlines()
    cells = dict(zip(header.split(","), lines[0].split(",")))
    steps = prof.steps.to_pylist()
    assert [s["step_id"] for s in steps] == [int(ln.split(",")[1]) for ln in lines] and len(steps) >= 3
    first = steps[0]
    assert first["fp_start_ns"] == _us_to_ns(cells["FP Start(us)"])
    assert first["bp_end_ns"] == _us_to_ns(cells["BP End(us)"])
    assert first["end_ns"] == _us_to_ns(cells["Iteration End(us)"])
    assert first["iteration_ns"] == _us_to_ns(cells["Iteration Time(us)"])
    assert first["start_ns"] == first["end_ns"] - first["iteration_ns"]
    assert first["model_id"] == int(cells["Model ID"]) and first["device_id"] == int(cells["Device_id"])
    assert not [w for w in map(str, prof.meta.warnings) if "step_trace" in w]


def test_readme_alone_marks_simulated(tmp_path):
    root = _real_layout(tmp_path, info=None)
    (root / "mindstudio_profiler_output" / "README.txt").write_text(
        "SIMULATED profile written by `pypto synth` (PyPTO); never measured on an NPU.\n", encoding="utf-8")
    assert open_profile(root).meta.simulated is True


def test_real_layout_info_json_device_id_and_cann_without_simulated(tmp_path):
    prof = open_profile(_real_layout(tmp_path))
    m = prof.meta
    assert m.simulated is False
    assert m.device_id == 3 and m.device is None  # no chip_name in real info.json: never guessed
    assert m.cann_version == "8.3.RC1" and m.rank is None  # rank_id -1 = RANK_ID unset
    assert m.extra["device_info"]["3"] == {"ai_core_num": 24, "aiv_num": 48, "aic_frequency": "1800",
                                           "hwts_frequency": "50", "platform_version": "5"}
    assert prof.kernels.num_rows == 20


def test_simulated_key_in_real_shaped_info(tmp_path):
    info = {**REAL_INFO, "simulated": True, "DeviceInfo": [{**REAL_INFO["DeviceInfo"][0],
                                                            "chip_name": "Ascend910B4"}]}
    prof = open_profile(_real_layout(tmp_path, info=info))
    assert prof.meta.simulated is True and prof.meta.device == "Ascend910B4"


def test_broken_info_json_is_a_warning(tmp_path):
    root = _real_layout(tmp_path)
    (root / "device_3" / "info.json.3").write_text("{not json", encoding="utf-8")
    prof = open_profile(root)
    assert prof.kernels.num_rows == 20 and prof.meta.device_id is None
    assert any("info.json.3" in w for w in map(str, prof.meta.warnings))


def test_step_trace_with_reduce_pairs(tmp_path):
    rows = ["0,1,100.500\t,180.000\t,200.000\t,200.000,79.500,2.000,N/A,1,150.000,10.250,160.000,5.000\n",
            "0,2,210.000\t,380.000\t,400.000\t,200.000,170.000,2.000,10.000,1,300.000,7.000,N/A,N/A\n"]
    prof = open_profile(_real_layout(tmp_path, step_rows=rows))
    steps = prof.steps.to_pylist()
    assert [s["step_id"] for s in steps] == [1, 2]
    assert [(s["start_ns"], s["end_ns"]) for s in steps] == [(0, 200000), (200000, 400000)]
    assert [s["reduce_ns"] for s in steps] == [15250, 7000] and [s["reduce_count"] for s in steps] == [2, 1]
    assert steps[1]["data_aug_bound_ns"] == 10000 and steps[0]["communication_ns"] is None


def test_device_id_from_kernels_device_id_column(tmp_path):
    # op_summary with a Device_id column and no info.json: the id comes from the kernels
    root = _real_layout(tmp_path, info=None)
    csv = root / "mindstudio_profiler_output" / "op_summary_20260323031749.csv"
    lines = csv.read_text(encoding="utf-8").splitlines()
    csv.write_text("\n".join(["Device_id," + lines[0]] + ["5," + ln for ln in lines[1:]]) + "\n",
                   encoding="utf-8")
    prof = open_profile(root)
    assert prof.meta.device_id == 5 and prof.kernels["device_id"].to_pylist() == [5] * 20


def test_several_device_ids_are_listed_not_chosen(tmp_path):
    root = _real_layout(tmp_path, info=None)
    csv = root / "mindstudio_profiler_output" / "op_summary_20260323031749.csv"
    lines = csv.read_text(encoding="utf-8").splitlines()
    body = [f"{i % 2}," + ln for i, ln in enumerate(lines[1:])]
    csv.write_text("\n".join(["Device_id," + lines[0]] + body) + "\n", encoding="utf-8")
    prof = open_profile(root)
    assert prof.meta.device_id is None and prof.meta.extra["device_ids"] == [0, 1]


def test_ascend_pt_device_id_from_kernel_details():
    # kernel_details.csv of CANN 8.3.RC1 has Device_id (all 0 on rank 0); profiler_info carries no device id
    prof = open_profile(SAMPLES / "ascend_pt" / "qwen3_0.6b_train_4npu_level2" / "rank_0_ascend_pt")
    assert prof.meta.device_id == 0


def test_read_device_info_filters_by_device(tmp_path):
    for dev in (0, 1):
        d = tmp_path / f"device_{dev}"
        d.mkdir()
        info = {**REAL_INFO, "DeviceInfo": [{**REAL_INFO["DeviceInfo"][0], "id": dev}]}
        (d / f"info.json.{dev}").write_text(json.dumps(info), encoding="utf-8")
    both = ProfileMeta()
    read_device_info(tmp_path, both)
    # two devices: no single id
    assert both.device_id is None and set(both.extra["device_info"]) == {"0", "1"}
    one = ProfileMeta()
    read_device_info(tmp_path, one, device_id=1)
    assert one.device_id == 1
