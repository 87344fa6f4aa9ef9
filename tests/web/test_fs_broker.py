"""``make run``'s filesystem broker writes each message under a name no consumer takes, then renames it into
place: kombu's own wrote in place, and a worker that caught a file mid-write read it empty and stopped
("Unrecoverable error: JSONDecodeError", seen in CI)."""

from __future__ import annotations

import queue
from pathlib import Path

import pytest
from kombu import Connection


def _connection(folder: Path) -> Connection:
    for sub in ("out", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return Connection("filesystem://", transport="pypto_web.fs_broker:Transport", transport_options={
        "data_folder_in": str(folder / "out"), "data_folder_out": str(folder / "out"),
        "data_folder_processed": str(folder / "processed"), "control_folder": str(folder / "control")})


def test_a_message_being_written_is_not_taken_and_a_written_one_is(tmp_path: Path) -> None:
    with _connection(tmp_path) as conn:
        q = conn.SimpleQueue("jobs")
        # a message another process is still writing: empty so far, under the writer's temporary name
        (tmp_path / "out" / ".1_x.jobs.msg.part").write_bytes(b"")
        with pytest.raises(queue.Empty):
            q.get(timeout=0.2)
        q.put({"profile": 7})
        assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".part")
                    and p.name != ".1_x.jobs.msg.part"]  # the written message left no partial file
        message = q.get(timeout=2)
        assert message.payload == {"profile": 7}
        message.ack()
        q.close()


def test_the_settings_choose_it_for_a_filesystem_broker() -> None:
    from django.conf import settings

    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        assert settings.CELERY_BROKER_TRANSPORT == "pypto_web.fs_broker:Transport"
    from pypto_web.fs_broker import Transport

    assert Transport.Channel._put is not Transport.__mro__[1].Channel._put
