"""``TuningSession``: a Profiler that keeps each labelled run, diagnoses it, and compares before/after.

    session = TuningSession("llama-decode", output_dir="runs")
    with session.run("baseline") as prof:
        generate(model); prof.step()
    apply_fix(model)
    with session.run("fused-norm") as prof:
        generate(model); prof.step()
    session.compare("baseline", "fused-norm")     # the ``compare`` JSON of docs/contract.md

Used directly as a context manager or decorator it records one run per use, labelled ``run1``, ``run2``...

With a dashboard: ``session.upload(server, project, token)`` sends the latest run, and
``session.verify(finding_ids)`` has a capture agent run the workload again with those findings' remedies
and returns the measured verdicts (fixed / persisting / worse, ``pypto_core.fix_verdict``).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from pypto_core.capture.options import CaptureOptions
from pypto_core.capture.profiler import Profiler
from pypto_core.errors import PyptoError
from pypto_core.profile import Profile


class TuningSession(Profiler):
    def __init__(
        self,
        name: str = "session",
        output_dir: str | os.PathLike[str] | None = None,
        *,
        options: CaptureOptions | None = None,
        backend: str | None = None,
        **params: Any,
    ) -> None:
        super().__init__(output_dir, options=options, backend=backend, **params)
        self.name = name
        self.root = self.output_dir
        self.runs: dict[str, Path] = {}
        self._label: str | None = None

    def run(self, label: str) -> TuningSession:
        """Name the next recording (one folder per label under the session's folder)."""
        if self.recording:
            raise PyptoError("a run is already recording")
        if label in self.runs:
            raise PyptoError(f"run {label!r} already recorded in this session")
        self._label = label
        return self

    def start(self) -> TuningSession:
        label = self._label or f"run{len(self.runs) + 1}"
        self._label = label
        self.output_dir = self.root / label
        super().start()
        self.runs[label] = self.output_dir
        return self

    def stop(self) -> None:
        super().stop()
        self._label = None

    def results(self, label: str | None = None) -> Profile:
        """The canonical profile of one run (the latest when no label)."""
        return self._profile(label or self._latest())

    def diagnose(self, label: str | None = None, sku: str | None = None) -> Any:
        """The rules' report for one run (``pypto_core.rules.diagnose``)."""
        rules = importlib.import_module("pypto_core.rules")
        diagnose = getattr(rules, "diagnose", None)
        if diagnose is None:
            raise PyptoError("this install has no diagnosis rules (pypto_core.rules.diagnose)")
        profile = self.results(label)
        return diagnose(profile, sku=sku) if sku else diagnose(profile)

    def compare(self, base: str, new: str) -> Any:
        """Before/after comparison of two runs (``pypto_core.compare``)."""
        compare = importlib.import_module("pypto_core.compare")
        comparer = getattr(compare, "ProfileComparer", None)
        if comparer is None:
            raise PyptoError("this install has no comparer (pypto_core.compare.ProfileComparer)")
        return comparer(lambda: self._profile(base), lambda: self._profile(new)).compare()

    def upload(self, server: str, project: int | str, token: str | None, *, name: str | None = None
               ) -> dict[str, Any]:
        """Upload the latest run; remembered for ``verify``."""
        answer = super().upload(server, project, token, name=name)
        self.uploaded = {"server": server, "token": token, "profile": answer.get("id")}
        return answer

    def verify(self, finding_ids: list[int], *, profile: int | None = None, server: str | None = None,
               token: str | None = None, agent: int | None = None, workload: str | None = None,
               wait: bool = True, limit_s: float = 3600.0) -> dict[str, Any]:
        """Run the workload again on a capture agent with the findings' remedies; the job and the verdicts.

        ``profile``, ``server`` and ``token`` default to this session's last upload; ``agent`` and
        ``workload`` to the capture the profile came from."""
        from pypto_core.capture.client import ApiClient
        from pypto_core.capture.verify import verify_findings

        last = getattr(self, "uploaded", None) or {}
        server, token = server or last.get("server"), token or last.get("token")
        profile = profile if profile is not None else last.get("profile")
        if not server or profile is None:
            raise PyptoError("verify needs a profile on a dashboard: upload a run first, or pass profile= "
                             "and server=")
        return verify_findings(ApiClient(server, token), int(profile), list(finding_ids), agent=agent,
                               workload=workload, wait=wait, limit_s=limit_s)

    def _latest(self) -> str:
        if not self.runs:
            raise PyptoError(f"session {self.name!r} has recorded nothing yet")
        return list(self.runs)[-1]

    def _profile(self, label: str) -> Profile:
        if label not in self.runs:
            raise PyptoError(f"session {self.name!r} has no run {label!r} "
                             f"(runs: {', '.join(self.runs) or 'none'})")
        from pypto_core.capture.profiler import read_capture

        return read_capture(self.runs[label])
