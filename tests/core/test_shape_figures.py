"""Shape figures (MatMul dims, FLOPs, bytes moved, element size, roofline bound) worked out once per distinct
(shapes, dtypes, role) on a projected load are, kernel for kernel, the figures worked out per kernel from
the whole load's lists; and a rule asking for some kernels' figures gets those of the whole array."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pypto_core import formats
from pypto_core.graph import OperatorCallGraph
from pypto_core.profile import Profile
from pypto_core.rules import diagnose_columns
from pypto_core.shape_figures import FIGURES
from pypto_core.synth import demo_pair
from tests.paths import SAMPLES, sample_cases


def _graphs(source: Path, tmp: Path) -> tuple[OperatorCallGraph, OperatorCallGraph]:
    saved = formats.write_profiles(source, tmp)
    rank = tmp / saved.ranks[0][0]
    return (OperatorCallGraph(Profile.load(rank)),
            OperatorCallGraph(Profile.load(rank, columns=diagnose_columns())))


def _same_figures(whole: OperatorCallGraph, coded: OperatorCallGraph) -> None:
    assert coded.shape_figures.group is not None and whole.shape_figures.group is None
    groups = len(coded.shape_figures.rows["flops"])
    assert 0 < groups < coded.n  # a few distinct tuples for many kernels
    some = np.flatnonzero(np.arange(coded.n) % 7 == 3)
    for name in FIGURES:
        every = coded.figure(name)
        np.testing.assert_array_equal(every, whole.figure(name), err_msg=name)
        np.testing.assert_array_equal(coded.figure(name, some), every[some], err_msg=name)
        mask = every > 0
        np.testing.assert_array_equal(coded.figure(name, mask), every[mask], err_msg=name)
        for kernels in (mask, np.arange(coded.n) % 7 == 3):  # counted per group: np.unique's counts
            values, counts = coded.shape_figures.value_counts(name, kernels)
            expected, expected_counts = np.unique(every[kernels], return_counts=True)
            np.testing.assert_array_equal(values, expected, err_msg=name)
            np.testing.assert_array_equal(counts, expected_counts, err_msg=name)
            assert whole.shape_figures.value_counts(name, kernels)[1].tolist() == expected_counts.tolist()
    assert coded.figure("k").max() > 0  # the demo's and the sample's MatMuls have a K


def test_the_demo_figures_are_the_same_grouped(tmp_path: Path) -> None:
    before, _ = demo_pair(tmp_path / "demo")
    _same_figures(*_graphs(before, tmp_path / "saved"))


@pytest.mark.parametrize("sample", sample_cases(["ascend_pt/qwen3_0.6b_train_4npu_level2",
                                                 "ascend_pt/llm_matmul_pipeutil_2025"]))
def test_real_sample_figures_are_the_same_grouped(tmp_path: Path, sample: str) -> None:
    _same_figures(*_graphs(SAMPLES / sample, tmp_path / "saved"))
