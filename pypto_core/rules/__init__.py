"""The anti-pattern rules: ``diagnose(profile, config=None, sku=None) -> Report``.

One module per rule (registered with ``@rule`` in ``registry.py``, found by scanning this package);
thresholds live in ``config.py``; the combined speedup follows Amdahl over the union of what the findings
cover, never a product of per-finding factors.
"""

from pypto_core.rules.diagnose import diagnose, diagnose_columns, diagnose_group
from pypto_core.rules.finding import Finding, Report

__all__ = ["diagnose", "diagnose_columns", "diagnose_group", "Finding", "Report"]
