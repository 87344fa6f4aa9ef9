"""docs/architecture.md house rule: the engine imports nothing from Django or Celery."""

import subprocess
import sys


def test_pypto_core_imports_no_django_or_celery() -> None:
    code = (
        "import sys, pkgutil, importlib, pypto_core\n"
        "for m in pkgutil.walk_packages(pypto_core.__path__, 'pypto_core.'):\n"
        "    if m.name.startswith('pypto_core.capture') or m.name == 'pypto_core.__main__':\n"
        "        continue\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('django', 'celery', 'rest_framework'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"pypto_core imported: {out.stdout.strip()}"


def test_profile_round_trip(tmp_path) -> None:
    import pyarrow as pa

    from pypto_core.profile import Profile, ProfileMeta

    kernels = pa.table({"name": ["MatMulV2"], "start_ns": pa.array([1736408883688177930], pa.int64()),
                        "dur_ns": pa.array([1000], pa.int64()), "aic_mte2_ratio": [0.5]})
    prof = Profile(meta=ProfileMeta(format="ascend_pt", rank=0), kernels=kernels)
    loaded = Profile.load(prof.save(tmp_path / "p"))
    assert loaded.kernels["start_ns"][0].as_py() == 1736408883688177930
    assert loaded.kernels["aic_mte2_ratio"][0].as_py() == 0.5
    assert loaded.meta.rank == 0
    assert loaded.time_span_ns() == (1736408883688177930, 1736408883688178930)
