"""Agent config checks, the msprof command line, and vLLM's start/stop profiling (a stand-in HTTP server:
vLLM needs a GPU or NPU, so the stand-in does what vLLM does: write a profile folder when profiling stops)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pypto_core.capture.agent_config import load_config
from pypto_core.capture.options import validate_params
from pypto_core.capture.workloads import RunContext, msprof_command, profile_vllm, run_workload
from pypto_core.errors import InputError


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(body)
    return path


def test_config_refuses_unknown_keys_kinds_and_missing_commands(tmp_path: Path) -> None:
    for body, reason in [
        ('[workloads.a]\nkind = "python"\ncommand = "x"\nshell = true\n', "unknown keys shell"),
        ('[workloads.a]\nkind = "bash"\ncommand = "x"\n', "kind"),
        ('[workloads.a]\nkind = "python"\n', "needs a command"),
        ('[workloads.a]\nkind = "vllm"\nurl = "http://x"\n', "url and profile_dir"),
        ('[workloads."a b"]\ncommand = "x"\n', "a name is"),
        ("name = 1\n", "at least one"),
        ("[workloads.a\n", "not valid TOML"),
    ]:
        with pytest.raises(InputError, match=reason):
            load_config(_config(tmp_path, body))


def test_config_public_view_hides_commands(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path,
                              '[workloads.a]\ncommand = "python run.py --secret s3"\nenv = {K = "v"}\n'))
    assert cfg.workloads["a"].command == ("python", "run.py", "--secret", "s3")
    assert cfg.public_workloads() == [{"name": "a", "kind": "python", "description": "", "timeout_s": 3600,
                                       "patchable": False}]


def test_msprof_command_follows_the_options(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path, '[workloads.om]\nkind = "msprof"\ncommand = ["./infer", "m.om"]\n'))
    opts = validate_params({"profiler_level": "Level2", "aic_metrics": "Memory", "l2_cache": True,
                            "export_type": "db"})
    cmd = msprof_command(cfg.workloads["om"], opts, tmp_path / "out")
    assert cmd[0] == "msprof" and cmd[-2:] == ["./infer", "m.om"]
    for flag in (f"--output={tmp_path / 'out'}", "--task-time=l1", "--ascendcl=on", "--runtime-api=on",
                 "--ai-core=on", "--aic-metrics=Memory", "--l2=on", "--type=db"):
        assert flag in cmd
    off = msprof_command(cfg.workloads["om"], validate_params({"aic_metrics": "AiCoreNone"}), tmp_path)
    assert "--ai-core=off" in off and not any(a.startswith("--aic-metrics") for a in off)


@pytest.fixture
def fake_vllm(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    profile_dir = tmp_path / "vllm-profile"
    calls: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            calls.append(self.path)
            if self.path == "/stop_profile":
                run = profile_dir / "host_1_20260101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
                run.mkdir(parents=True)
                (run / "kernel_details.csv").write_text("Name,Type\nMatMulV2,MatMulV2\n")
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", profile_dir, calls
    server.shutdown()


def test_vllm_workload_profiles_a_running_server(tmp_path: Path, fake_vllm) -> None:
    url, profile_dir, calls = fake_vllm
    profile_dir.mkdir()
    (profile_dir / "older_run_ascend_pt").mkdir()  # an earlier capture stays out of this job
    cfg = load_config(_config(tmp_path, f'[workloads.v]\nkind = "vllm"\nurl = "{url}"\n'
                                        f'profile_dir = "{profile_dir}"\nsettle_s = 0.3\ntimeout_s = 30\n'))
    out = tmp_path / "out"
    with open(tmp_path / "job.log", "w") as log:
        ctx = RunContext(cfg.workloads["v"], {"duration_s": 1}, validate_params({"duration_s": 1}), out, log,
                         threading.Event())
        written = run_workload(ctx)
    assert calls == ["/start_profile", "/stop_profile"]
    assert [p.name for p in written] == ["host_1_20260101000000000_ascend_pt"]
    assert (out / "host_1_20260101000000000_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv").exists()


def test_vllm_cancel_still_stops_profiling(tmp_path: Path, fake_vllm) -> None:
    from pypto_core.capture.workloads import WorkloadCancelled

    url, profile_dir, calls = fake_vllm
    cfg = load_config(_config(tmp_path,
                              f'[workloads.v]\nkind = "vllm"\nurl = "{url}"\nprofile_dir = '
                              f'"{profile_dir}"\n'))
    cancel = threading.Event()
    cancel.set()
    with open(tmp_path / "job.log", "w") as log, pytest.raises(WorkloadCancelled):
        profile_vllm(RunContext(cfg.workloads["v"], {}, validate_params({"duration_s": 600}), tmp_path / "o",
                                log, cancel))
    assert calls == ["/start_profile", "/stop_profile"]  # never left profiling
