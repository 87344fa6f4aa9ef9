"""The top bar's tagline says the device and workload of the profile on the page (``frontend.taglines``):
"LLM inference tuning for Ascend NPUs" showed on an A100 training trace. Pages about no profile, or about a
profile whose device the engine could not tell, keep the neutral product description."""

from __future__ import annotations

import re

import pytest
from django.utils import translation

from tests.paths import SAMPLES
from tests.web.helpers import project_with
from tests.web.test_cluster import analysed_sample

pytestmark = pytest.mark.django_db


def tagline_of(html: str) -> str:
    match = re.search(r'<span class="tagline" id="tagline">([^<]*)</span>', html)
    assert match, "no tagline in the top bar"
    return match.group(1)


def test_the_tagline_names_what_the_engine_detected_in_both_languages() -> None:
    from frontend.taglines import tagline

    with translation.override("en"):
        assert tagline(["nvidia"], ["training"]) == "Tuning training on NVIDIA GPUs"
        assert tagline(["ascend"], ["llm_decode"]) == "Tuning LLM inference on Ascend NPUs"
        assert tagline(["amd"], ["unknown"]) == "Performance tuning on AMD GPUs"
        # a comparison across vendors names both; workloads that differ are left out
        assert tagline(["ascend", "nvidia"], ["training", "training"]) == \
            "Tuning training on Ascend NPUs and NVIDIA GPUs"
        assert tagline(["ascend", "ascend"], ["training", "llm_decode"]) == \
            "Performance tuning on Ascend NPUs"
        neutral = tagline(["unknown"], ["training"])
        assert neutral == tagline([], []) == "Performance tuning for Ascend NPUs and GPUs"
    with translation.override("zh-hans"):
        assert tagline(["nvidia"], ["training"]) == "NVIDIA GPU 训练调优"
        assert tagline(["ascend"], ["llm_serving"]) == "昇腾 NPU 大模型服务化推理调优"
        assert tagline([None], [None]) == "昇腾 NPU 与 GPU 性能调优"


def test_a_gpu_training_profile_is_not_called_npu_inference(client, make_user, settings, tmp_path) -> None:
    settings.PYPTO_WORK_DIR = tmp_path / "work"
    owner = make_user("owner")
    project = project_with(owner)
    gpu = analysed_sample(project, owner, SAMPLES / "kineto" / "a100_nccl_2rank" / "nccl_data.json.gz",
                          tmp_path)
    client.force_login(owner)
    for url in (f"/profiles/{gpu.pk}/", f"/profiles/{gpu.pk}/timeline/"):
        text = tagline_of(client.get(url).content.decode())
        assert text == "Tuning training on NVIDIA GPUs", (url, text)
        assert "Ascend" not in text and "inference" not in text
    # a page about no profile: the product, neutral
    assert tagline_of(client.get("/").content.decode()) == "Performance tuning for Ascend NPUs and GPUs"
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    assert tagline_of(client.get(f"/profiles/{gpu.pk}/").content.decode()) == "NVIDIA GPU 训练调优"
