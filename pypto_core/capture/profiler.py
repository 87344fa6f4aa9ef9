"""``Profiler``: wrap an inference in the right profiler and get a canonical ``Profile`` back.

    from pypto_core import Profiler

    with Profiler(warmup=1, active=3) as prof:      # or @Profiler(...) on a function
        for _ in range(8):
            model.generate(...)
            prof.step()
    profile = prof.get_results()
    prof.upload("https://pypto.example", project=3, token="...")

Under the capture agent the job's options and output folder arrive through ``PYPTO_CAPTURE_DIR`` and
``PYPTO_CAPTURE_OPTIONS``; they override what the script asked for, because the job is what the user
requested from the dashboard.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

from pypto_core.capture import backend as backends
from pypto_core.capture.options import ENV_DIR, ENV_OPTIONS, CaptureOptions, OptionsError, validate_params
from pypto_core.errors import PyptoError
from pypto_core.formats import open_profile
from pypto_core.profile import Profile

F = TypeVar("F", bound=Callable[..., Any])

# The profiler that is recording in this process: torch allows one at a time, so an inner Profiler
# (a script that uses the SDK, run by the agent's wrapper) joins the outer one instead of failing.
_ACTIVE: "Profiler | None" = None


class Profiler:
    """Context manager and decorator around torch_npu.profiler / torch.profiler."""

    def __init__(
        self,
        output_dir: str | os.PathLike[str] | None = None,
        *,
        options: CaptureOptions | None = None,
        backend: str | None = None,
        worker_name: str | None = None,
        **params: Any,
    ) -> None:
        base = options.to_dict() if options else {}
        base.update(params)
        env_params = _env_params()
        if env_params:
            base.update(env_params)
        self.options = validate_params(base)
        env_dir = os.environ.get(ENV_DIR)
        chosen = output_dir if output_dir is not None else env_dir
        self.output_dir = Path(chosen) if chosen else Path.cwd() / "pypto_captures" / time.strftime("%Y%m%d-%H%M%S")
        self.backend = backend
        self.worker_name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        self._prof: Any = None
        self._open = False
        self._window_steps = 0
        self._joined: Profiler | None = None
        self._results: Profile | None = None
        self.steps = 0

    # -- recording ---------------------------------------------------------------------------------------

    def start(self) -> "Profiler":
        global _ACTIVE
        if self._open or self._joined is not None:
            raise PyptoError("this Profiler is already recording")
        if _ACTIVE is not None:
            self._joined = _ACTIVE
            return self
        self.backend = self.backend or backends.detect_backend()
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self._results = None
        self.steps = 0
        self._open = True
        _ACTIVE = self
        if self.options.scheduled:
            self._begin_step(0)
        else:
            self._prof = self._build(self.options)
        return self

    def _build(self, options: CaptureOptions, first_step: int = 0) -> Any:
        prof = backends.build_profiler(self.backend or "cpu", options, self.output_dir, self.worker_name)
        if first_step:
            _number_steps_from(prof, first_step)
        prof.start()
        return prof

    def _begin_step(self, index: int) -> None:
        """The SDK runs the wait/skip part of the schedule itself: the torch profiler exists only from the
        first warmup step to the last active step of each cycle, so between captures a step costs a counter
        (bench/capture.py measures it)."""
        o = self.options
        position = index - o.skip_first
        if position < 0 or self._prof is not None:
            return
        cycle, k = divmod(position, o.wait + o.warmup + o.active)
        if cycle < o.repeat and k == o.wait:
            # numbered from the run's start: ProfilerStep#N in the trace is the N-th step() of the run
            self._prof = self._build(o.replace(wait=0, skip_first=0, repeat=1), first_step=index)
            self._window_steps = 0

    def step(self) -> None:
        """Mark the end of one step (one generated token, one request): drives the warmup/active schedule.

        Step numbers in the written trace (``ProfilerStep#N``) count from the start of the run, so the
        windows of a repeated schedule do not reuse numbers and N matches the script's own step count."""
        if self._joined is not None:
            self._joined.step()
            return
        if not self._open:
            return
        self.steps += 1
        if self._prof is not None:
            self._prof.step()
            if self.options.scheduled:
                self._window_steps += 1
                if self._window_steps >= self.options.warmup + self.options.active:
                    self._stop_torch()  # the window's trace was written by on_trace_ready at its last step
        if self.options.scheduled:
            self._begin_step(self.steps)

    def _stop_torch(self) -> None:
        prof, self._prof = self._prof, None
        if prof is not None:
            prof.stop()  # writes the trace (and, on NPU, parses it) through on_trace_ready

    def stop(self) -> None:
        global _ACTIVE
        if self._joined is not None:
            self._joined = None
            return
        if not self._open:
            return
        try:
            self._stop_torch()
        finally:
            self._open = False
            _ACTIVE = None

    def __enter__(self) -> "Profiler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    @property
    def recording(self) -> bool:
        return self._open or self._joined is not None

    # -- results -----------------------------------------------------------------------------------------

    def get_results(self) -> Profile:
        """The canonical profile of what was recorded (read back from the folder the profiler wrote)."""
        if self._results is None:
            self._results = read_capture(self.output_dir)
        return self._results

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Save the canonical profile as Parquet (``Profiler.load`` reads it back)."""
        return self.get_results().save(directory)

    @staticmethod
    def load(directory: str | os.PathLike[str]) -> Profile:
        return Profile.load(directory)

    def upload(
        self, server: str, project: int | str, token: str | None, *, name: str | None = None
    ) -> dict[str, Any]:
        """Upload the raw profiler output (the server keeps and re-reads the original) to a project."""
        from pypto_core.capture.upload import upload_profile

        if self.recording:
            raise PyptoError("stop the Profiler before uploading")
        if not self.output_dir.is_dir() or not any(self.output_dir.iterdir()):
            raise PyptoError(f"{self.output_dir}: nothing was recorded")
        return upload_profile(self.output_dir, server=server, project=project, token=token, name=name)


def _number_steps_from(prof: Any, first: int) -> None:
    """Make a profiler built for one window (its schedule starts at 0) label its steps from ``first``.

    torch.profiler.profile and torch_npu's profile both name a step ``"ProfilerStep#" + str(step_num)`` and
    ask ``schedule(step_num)`` for the next action, so the counter moves and the schedule is shifted back by
    the same amount: the window records exactly as before, under the run's step numbers."""
    if not hasattr(prof, "step_num") or not callable(getattr(prof, "schedule", None)):
        return  # a profiler without these (an unknown backend) keeps its own numbering
    window_schedule = prof.schedule
    prof.schedule = lambda step: window_schedule(max(0, step - first))
    prof.step_num = first


def _env_params() -> dict[str, Any] | None:
    raw = os.environ.get(ENV_OPTIONS)
    if not raw:
        return None
    try:
        params = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionsError(f"{ENV_OPTIONS}: not JSON ({exc})") from exc
    validate_params(params)  # refuse before merging, so the error names the job's key
    return dict(params)


def read_capture(folder: Path) -> Profile:
    """Read what a Profiler wrote into ``folder`` as one canonical profile (the lowest rank if several)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise PyptoError(f"{folder}: no capture here")
    return open_profile(folder)
