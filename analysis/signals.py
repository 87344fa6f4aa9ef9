"""What the analysis tells the apps above it (docs/architecture.md, "Layers").

``captures`` sits above ``analysis`` (a verification job is a capture job that checks a finding's fix), so the
analysis cannot call it; it sends these signals instead, and ``captures/apps.py`` connects its receivers.
Receivers run synchronously, in the sender's transaction where one is open.
"""

from __future__ import annotations

from django.dispatch import Signal

# A profile became ready; sent in the transaction that made it so (``profile_id``). Receivers queue what
# follows after the commit (``transaction.on_commit``).
profile_ready = Signal()

# A comparison finished with a result (``comparison_id``), after it was saved.
comparison_done = Signal()

# The recovery sweep runs (``analysis.recovery``): each receiver cleans what it owns and returns
# ``{what: how many}``, merged into the sweep's own counts.
recovery_sweep = Signal()
