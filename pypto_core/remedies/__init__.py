"""Downloadable remedies: for each finding, the tuning config, script, patch module or diff that fixes it.

``generate_artifacts(report, profile_meta=..., model_source=...)`` returns ``Artifact``s; ``bundle_zip`` packs
them. One generator module per rule (``tiling``, ``kv_cache_layout``, ``fused_attention``, ``norm_fusion``),
found through ``registry``. Generated code is text: nothing here imports torch or torch_npu.
"""

from pypto_core.remedies.artifact import Artifact
from pypto_core.remedies.bundle import bundle_zip
from pypto_core.remedies.registry import generate_artifacts, generators

__all__ = ["Artifact", "bundle_zip", "generate_artifacts", "generators"]
