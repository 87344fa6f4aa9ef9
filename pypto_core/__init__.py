"""PyPTO's engine and SDK: plain Python, no Django.

Readers turn profiler output into a canonical ``Profile``; the graph, rules and remedies diagnose it;
``compare`` proves a fix. See docs/architecture.md for the module map.
"""

from typing import Any

from pypto_core.memory import choose_pool_before_pyarrow

choose_pool_before_pyarrow()  # before the first pyarrow import below: Arrow's C++ pool is chosen as it loads

from pypto_core.errors import InputError, PyptoError  # noqa: E402  (after the pool is chosen)
from pypto_core.profile import Profile, ProfileGroup, ProfileMeta  # noqa: E402

__version__ = "0.1.0"

__all__ = ["InputError", "Profile", "ProfileGroup", "ProfileMeta", "PyptoError", "__version__"]


# the capture SDK, imported on first use (`from pypto_core import Profiler`)
def __getattr__(name: str) -> Any:
    if name in ("Profiler", "TuningSession"):
        from pypto_core import capture

        return getattr(capture, name)
    raise AttributeError(f"module 'pypto_core' has no attribute {name!r}")
