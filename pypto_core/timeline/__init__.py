"""The timeline: a level-of-detail index for window queries, and Perfetto-correct chrome-trace export."""

from pypto_core.timeline.chrome_trace import export_chrome_trace
from pypto_core.timeline.index import TimelineIndex, build_timeline_index

__all__ = ["TimelineIndex", "build_timeline_index", "export_chrome_trace"]
