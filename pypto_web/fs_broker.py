"""The filesystem Celery broker of ``make run`` (no server), with each message written atomically.

kombu's filesystem transport writes a message file in place under an advisory lock, and a consumer moves and
reads any file whose name ends in ``.<queue>.msg``: one caught mid-write reads empty, and the worker stops
with "Unrecoverable error: JSONDecodeError" (seen in CI with the recovery sweep queued every second). Here a
message is written under a name no consumer takes, then renamed into place, which is atomic on one
filesystem.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    # as kombu's filesystem channel names its arguments (its base class names the second "message")
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, "." + name + ".part")  # not "<queue>.msg": skipped
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
