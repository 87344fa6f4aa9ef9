"""Capture: ``Profiler`` / ``TuningSession`` over torch_npu.profiler or torch.profiler, the resumable
uploader, and the host agent that runs captures the dashboard asks for.

Nothing here imports torch until a capture starts.
"""

from pypto_core.capture.options import CaptureOptions, OptionsError, validate_params
from pypto_core.capture.profiler import Profiler
from pypto_core.capture.session import TuningSession

__all__ = ["CaptureOptions", "OptionsError", "Profiler", "TuningSession", "validate_params"]
