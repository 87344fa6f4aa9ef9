"""The line beside the brand in the top bar: what PyPTO tunes, said for the profile on the page.

A profile page says its device and workload as the engine detected them (``pypto_core.workload``: the
report's ``device_vendor`` and ``workload``), a comparison the devices and workload of both sides; every
other page, or a profile whose device the engine could not tell, gets the neutral product description.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

# the neutral line: what the product is, with nothing known of a profile
NEUTRAL = gettext_lazy("Performance tuning for Ascend NPUs and GPUs")
DEVICES = {"ascend": pgettext_lazy("tagline device", "Ascend NPUs"),
           "nvidia": pgettext_lazy("tagline device", "NVIDIA GPUs"),
           "amd": pgettext_lazy("tagline device", "AMD GPUs"),
           "cpu": pgettext_lazy("tagline device", "CPUs")}
WORKLOADS = {"llm_decode": pgettext_lazy("tagline workload", "LLM inference"),
             "llm_prefill": pgettext_lazy("tagline workload", "LLM inference"),
             "llm_serving": pgettext_lazy("tagline workload", "LLM serving"),
             "training": pgettext_lazy("tagline workload", "training"),
             "inference_other": pgettext_lazy("tagline workload", "inference")}


def tagline(vendors: Iterable[str | None], workloads: Iterable[str | None]) -> str:
    """"Tuning training on NVIDIA GPUs" and the like from what the engine detected; the neutral line where
    no device is known. Several devices (a comparison across vendors) are named together; workloads that
    differ, or none known, leave the workload out."""
    devices = [str(DEVICES[v]) for v in dict.fromkeys(vendors) if v in DEVICES]
    if not devices:
        return str(NEUTRAL)
    device = devices[0] if len(devices) == 1 else _("%(a)s and %(b)s") % {"a": devices[0], "b": devices[1]}
    kinds = {str(WORKLOADS[w]) for w in workloads if w in WORKLOADS}
    if len(kinds) == 1:
        return _("Tuning %(workload)s on %(device)s") % {"workload": kinds.pop(), "device": device}
    return _("Performance tuning on %(device)s") % {"device": device}


def profile_tagline(*profiles: Any) -> str:
    """The tagline of pages about these profiles (a profile, its timeline or cluster page, a comparison)."""
    from analysis.summary import summary_of

    reports = [summary_of(p).report_profile for p in profiles if p is not None]
    return tagline([r.get("device_vendor") for r in reports], [r.get("workload") for r in reports])
