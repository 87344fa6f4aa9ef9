"""pypto_core.archive: each hostile archive is refused with the member named and the reason."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from pypto_core.archive import detect_upload_kind, safe_extract, unpack_upload
from pypto_core.errors import InputError
from tests.web import bad_archives


def test_detect_upload_kind() -> None:
    assert detect_upload_kind("run.TAR.GZ") == "tar.gz"
    assert detect_upload_kind("a.tgz") == "tar.gz"
    assert detect_upload_kind("trace.json.gz") == "json.gz"
    assert detect_upload_kind("x.zip") == "zip"
    assert detect_upload_kind("x.tar") == "tar"
    assert detect_upload_kind("k.csv") == "csv"
    assert detect_upload_kind("p.db") == "db"
    assert detect_upload_kind("t.json") == "json"
    with pytest.raises(InputError, match="unsupported file type"):
        detect_upload_kind("evil.exe")
    with pytest.raises(InputError):
        detect_upload_kind(".zip")


def test_good_zip_and_tar_extract_with_sizes(tmp_path: Path) -> None:
    z = tmp_path / "ok.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rank_0_ascend_pt/", "")
        zf.writestr("rank_0_ascend_pt/kernel_details.csv", "Name,Duration(us)\nMatMulV2,3.5\n")
        zf.writestr("win\\style.txt", "x")
    files = safe_extract(z, tmp_path / "out")
    assert {(f.name, f.size) for f in files} == {
        ("rank_0_ascend_pt/kernel_details.csv", 31),
        ("win/style.txt", 1),
    }
    assert (tmp_path / "out/rank_0_ascend_pt/kernel_details.csv").read_text().startswith("Name,")

    t = tmp_path / "ok.tar.gz"
    with tarfile.open(t, "w:gz") as tf:
        data = b"hello"
        info = tarfile.TarInfo("d/a.txt")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    assert [(f.name, f.size) for f in safe_extract(t, tmp_path / "out2")] == [("d/a.txt", 5)]


def _tree(root: Path) -> dict[Path, tuple[bool, int]]:
    """Every path under ``root`` (links not followed): (is a link, size)."""
    return {p: (p.is_symlink(), p.lstat().st_size) for p in root.rglob("*")}


ABSOLUTE_TARGETS = (Path("/tmp/pypto-evil.csv"), Path("/etc/evil.csv"))


@pytest.mark.parametrize("case", bad_archives.CASES, ids=[c.id for c in bad_archives.CASES])
def test_bad_archive_refused_naming_member(tmp_path: Path, case: bad_archives.Case) -> None:
    path = case.build(tmp_path)
    before = path.read_bytes()
    # the destination sits two levels down, so that "../../x" lands inside tmp_path, where it is looked for
    dest = tmp_path / "a" / "b" / "out"
    dest.parent.mkdir(parents=True)
    around = _tree(tmp_path)
    absolute_before = {t: t.exists() for t in ABSOLUTE_TARGETS}
    with pytest.raises(InputError) as err:
        safe_extract(path, dest, **bad_archives.LIMITS)
    message = str(err.value)
    assert str(path) in message
    for needle in case.expect:
        assert needle in message, message
    assert path.read_bytes() == before  # the upload is never modified
    after = _tree(tmp_path)
    # nothing new, changed or linked outside the destination, before or after the refusal
    outside = {p: v for p, v in after.items() if p != dest and dest not in p.parents}
    assert outside == {p: v for p, v in around.items()}, set(outside) ^ set(around)
    assert not [p for p, (link, _) in after.items() if link], "no link is ever created"
    assert {t: t.exists() for t in ABSOLUTE_TARGETS} == absolute_before


def test_escape_paths_never_written(tmp_path: Path) -> None:
    z = tmp_path / "t.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("../../escaped.txt", "x")
    with pytest.raises(InputError):
        safe_extract(z, tmp_path / "a" / "b")
    assert not (tmp_path / "escaped.txt").exists()


def test_zip_special_file_modes(tmp_path: Path) -> None:
    z = tmp_path / "fifo.zip"
    with zipfile.ZipFile(z, "w") as zf:
        info = zipfile.ZipInfo("pipe")
        info.external_attr = (stat.S_IFIFO | 0o644) << 16
        zf.writestr(info, "")
    with pytest.raises(InputError, match="'pipe': special file"):
        safe_extract(z, tmp_path / "out")


def test_unpack_single_file_copies(tmp_path: Path) -> None:
    src = tmp_path / "upload.bin"
    src.write_bytes(b"a,b\n1,2\n")
    files = unpack_upload(src, tmp_path / "out", filename="kernel_details.csv")
    assert [f.to_dict() for f in files] == [{"name": "kernel_details.csv", "size": 8}]
    assert (tmp_path / "out/kernel_details.csv").read_bytes() == b"a,b\n1,2\n"
