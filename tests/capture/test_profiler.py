"""The SDK on CPU with the real torch.profiler; the NPU path with a stand-in torch_npu (no NPU here)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from pypto_core.capture import Profiler, TuningSession  # noqa: E402
from pypto_core.capture import backend as backends  # noqa: E402
from pypto_core.capture.options import ENV_DIR, ENV_OPTIONS, validate_params  # noqa: E402
from pypto_core.errors import PyptoError  # noqa: E402


def _work(n: int = 1) -> None:
    a = torch.randn(16, 16)
    for _ in range(n):
        a = a @ a
        a = a / a.norm()


def _trace(folder: Path) -> dict[str, Any]:
    traces = list(folder.glob("*.pt.trace.json"))
    assert len(traces) == 1, traces
    return json.loads(traces[0].read_text())


def _step_names(trace: dict[str, Any]) -> list[str]:
    return sorted(e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))


def test_context_manager_records_only_the_active_steps(tmp_path: Path) -> None:
    with Profiler(tmp_path, wait=1, warmup=1, active=2) as prof:
        for _ in range(6):
            _work()
            prof.step()
    assert prof.backend == "cpu" and prof.steps == 6
    # step 0 waits (no torch profiler at all), 1 warms up, 2-3 are recorded; nothing after the single repeat
    # (step numbers in the trace count from the start of the run, not of the recorded window)
    assert _step_names(_trace(tmp_path)) == ["ProfilerStep#2", "ProfilerStep#3"]


def test_repeat_writes_one_trace_per_window(tmp_path: Path) -> None:
    with Profiler(tmp_path, skip_first=1, wait=1, active=1, repeat=2) as prof:
        for _ in range(8):
            _work()
            prof.step()
    traces = sorted(tmp_path.glob("*.pt.trace.json"), key=lambda p: p.stat().st_mtime_ns)
    assert len(traces) == 2
    # step 0 is skipped, 1 waits, 2 is recorded, 3 waits, 4 is recorded: each window keeps the run's number
    names = [_step_names(json.loads(t.read_text())) for t in traces]
    assert names == [["ProfilerStep#2"], ["ProfilerStep#4"]]


def test_without_a_schedule_the_whole_block_is_recorded(tmp_path: Path) -> None:
    with Profiler(tmp_path, record_shapes=True):
        _work(3)
    names = {e.get("name") for e in _trace(tmp_path)["traceEvents"]}
    assert "aten::mm" in names


def test_decorator_records_each_call(tmp_path: Path) -> None:
    @Profiler(tmp_path)
    def infer(n: int) -> int:
        _work(n)
        return n

    assert infer(2) == 2
    assert len(list(tmp_path.glob("*.pt.trace.json"))) == 1


def test_job_options_from_the_environment_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "job"))
    monkeypatch.setenv(ENV_OPTIONS, json.dumps({"warmup": 0, "active": 1}))
    prof = Profiler(active=5, record_shapes=False)
    assert prof.output_dir == tmp_path / "job"
    assert prof.options.active == 1 and prof.options.record_shapes is False
    monkeypatch.setenv(ENV_OPTIONS, json.dumps({"shell": "id"}))
    with pytest.raises(PyptoError, match="params.shell"):
        Profiler()


def test_an_inner_profiler_joins_the_outer_one(tmp_path: Path) -> None:
    with Profiler(tmp_path / "outer") as outer:
        with Profiler(tmp_path / "inner") as inner:
            _work()
            inner.step()
        assert outer.steps == 1
    assert not (tmp_path / "inner").exists()
    assert len(list((tmp_path / "outer").glob("*.pt.trace.json"))) == 1


def test_upload_refuses_an_empty_capture(tmp_path: Path) -> None:
    with pytest.raises(PyptoError, match="nothing was recorded"):
        Profiler(tmp_path / "never").upload("http://127.0.0.1:9", 1, "t")


def test_tuning_session_keeps_labelled_runs(tmp_path: Path) -> None:
    session = TuningSession("demo", tmp_path)
    with session.run("baseline") as prof:
        _work()
        prof.step()
    with session:  # unlabelled: run2
        _work()
    assert list(session.runs) == ["baseline", "run2"]
    assert all(list(p.glob("*.pt.trace.json")) for p in session.runs.values())
    with pytest.raises(PyptoError, match="already recorded"):
        session.run("baseline")


# --- NPU: torch_npu cannot be installed without CANN and a device, so a stand-in records the calls ------


class _Enum:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def __getattr__(self, name: str) -> str:
        return f"{self.prefix}.{name}"


def _fake_torch_npu(calls: dict[str, Any]) -> types.ModuleType:
    prof = types.ModuleType("torch_npu.profiler")
    prof.ProfilerLevel = _Enum("ProfilerLevel")
    prof.AiCMetrics = _Enum("AiCMetrics")
    prof.ExportType = _Enum("ExportType")
    prof.ProfilerActivity = _Enum("ProfilerActivity")
    prof._ExperimentalConfig = lambda **kw: calls.setdefault("experimental", kw) or kw
    prof.schedule = lambda **kw: ("schedule", kw)
    prof.tensorboard_trace_handler = lambda d, worker_name=None: ("handler", d, worker_name)
    prof.profile = lambda **kw: calls.setdefault("profile", kw)
    pkg = types.ModuleType("torch_npu")
    pkg.profiler = prof
    return pkg


def test_npu_backend_builds_the_experimental_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, Any] = {}
    pkg = _fake_torch_npu(calls)
    monkeypatch.setitem(sys.modules, "torch_npu", pkg)
    monkeypatch.setitem(sys.modules, "torch_npu.profiler", pkg.profiler)
    opts = validate_params({"profiler_level": "Level2", "aic_metrics": "MemoryAccess", "l2_cache": True,
                            "profile_memory": True, "warmup": 1, "active": 2, "export_type": "db"})
    backends.build_profiler("npu", opts, tmp_path, "host_1")
    assert calls["experimental"] == {
        "profiler_level": "ProfilerLevel.Level2", "aic_metrics": "AiCMetrics.MemoryAccess", "l2_cache": True,
        "data_simplification": True, "export_type": "ExportType.Db",
    }
    kw = calls["profile"]
    assert kw["activities"] == ["ProfilerActivity.CPU", "ProfilerActivity.NPU"]
    assert kw["schedule"] == ("schedule", {"wait": 0, "warmup": 1, "active": 2, "repeat": 1, "skip_first": 0})
    assert kw["on_trace_ready"] == ("handler", str(tmp_path), "host_1")
    assert kw["profile_memory"] is True and kw["record_shapes"] is True


def test_detect_backend_ignores_a_torch_npu_without_device(monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _fake_torch_npu({})
    monkeypatch.setitem(sys.modules, "torch_npu", pkg)
    monkeypatch.setattr(backends.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(torch, "npu", types.SimpleNamespace(is_available=lambda: False), raising=False)
    assert backends.detect_backend() in ("cpu", "cuda")
    monkeypatch.setattr(torch, "npu", types.SimpleNamespace(is_available=lambda: True), raising=False)
    assert backends.detect_backend() == "npu"
