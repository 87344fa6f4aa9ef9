"""Benchmark: a whole torch_npu ``*_ascend_pt`` folder read into a saved profile, as an upload is.

The folder is a simulated run (``pypto_core.synth``) of ``size_mb``: kernel_details.csv plus trace_view.json
and the small files, the pair that real uploads carry. ``formats.write_profiles`` streams it into Parquet
(the kernel table and the timeline each with bounded memory, then the flows re-pointed and the steps
bounded one row group at a time), in a fresh child process per run so that its peak RSS is its own; the
saved profile is then loaded with ``Profile.load``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from pypto_core.bench._measure import write_profiles_figures

MB = 1024 * 1024


def _folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def run(sizes_mb: list[int], workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """Simulate, convert and load an ascend_pt folder of each size: MB/s and peak RSS for both."""
    from pypto_core.synth import synthesize_run

    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in sizes_mb:
        synth_dir, out_dir = work / f"ascend_pt_{size}mb", work / f"ascend_pt_{size}mb.saved"
        shutil.rmtree(synth_dir, ignore_errors=True)
        folder = synthesize_run(synth_dir, size_mb=size, tokens=4, prompt_tokens=128).path
        input_mb = _folder_bytes(folder) / MB
        entry: dict[str, Any] = {"size_mb": size, "input_mb": round(input_mb, 1),
                                 "files_mb": {f.name: round(f.stat().st_size / MB, 1)
                                              for f in sorted(folder.rglob("*")) if f.stat().st_size > MB}}
        entry.update(write_profiles_figures(folder, out_dir, input_mb))
        shutil.rmtree(synth_dir, ignore_errors=True)
        results.append(entry)
    return {"benchmark": "readers_folder", "input": "simulated *_ascend_pt folder (kernel_details.csv + "
            "trace_view.json)", "path": "formats.write_profiles", "results": results}


if __name__ == "__main__":  # python -m pypto_core.bench.readers_folder 100 /tmp/bench
    import json
    import sys

    print(json.dumps(run([int(sys.argv[1])], sys.argv[2]), indent=2))
