"""The anti-pattern rules: ``diagnose(profile, config=None, sku=None) -> Report``.

One module per rule, whose ``@rule(...)`` (``registry.py``) declares everything about it: thresholds with
their evidence, compare blocks, remedies, the columns it reads (modules are found by scanning this package);
``config.py`` applies a project's overrides to the declared thresholds. The combined speedup follows Amdahl
over the union of what the findings cover, never a product of per-finding factors.
"""

from pypto_core.rules.diagnose import diagnose, diagnose_columns, diagnose_group
from pypto_core.rules.finding import Finding, Report

__all__ = ["diagnose", "diagnose_columns", "diagnose_group", "Finding", "Report"]
