"""Host probes: npu-smi parsing and the CANN version files (no NPU here: real text from those tools)."""

from pathlib import Path

from pypto_core.capture import host

# The layout `npu-smi info` prints (one device shown; two lines per NPU).
NPU_SMI = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 23.0.rc3                 Version: 23.0.rc3                                             |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 93.4        42                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3161 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | Warning       | 90.1        40                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          3161 / 65536         |
+===========================+===============+====================================================+
"""


def test_parse_npu_smi() -> None:
    assert host.parse_npu_smi(NPU_SMI) == [
        {"id": 0, "sku": "910B3", "health": "OK"}, {"id": 1, "sku": "910B3", "health": "Warning"},
    ]
    assert host.parse_npu_smi("command not found") == []


def test_cann_version_from_toolkit_files(tmp_path: Path) -> None:
    root = tmp_path / "ascend-toolkit" / "latest"
    root.mkdir(parents=True)
    (root / "ascend_toolkit_install.info").write_text("package_name=Ascend-cann-toolkit\nversion=8.0.RC2\n")
    assert host.cann_version({"ASCEND_TOOLKIT_HOME": str(root)}) == "8.0.RC2"


def test_cann_version_from_linked_folder_name(tmp_path: Path) -> None:
    real = tmp_path / "ascend-toolkit" / "8.3.RC1"
    real.mkdir(parents=True)
    link = tmp_path / "ascend-toolkit" / "latest"
    link.symlink_to(real)
    assert host.cann_version({"ASCEND_TOOLKIT_HOME": str(link)}) == "8.3.RC1"


def test_capabilities_here_report_torch_and_no_npu() -> None:
    caps = host.capabilities()
    assert caps["torch"]  # installed for the capture tests
    assert caps["npu"] == [] and caps["torch_npu"] is None and caps["backend"] in ("cpu", "cuda")
