"""Produce the items of an iterator in a second thread, a bounded number ahead of the consumer.

File reads, zlib and the native scanners release the GIL, so reading the next chunk or scanning the next
batch overlaps with the consumer's work. The queue is bounded, so at most ``depth`` items are in flight.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def iterate_ahead(items: Iterator[T], *, depth: int, name: str) -> Generator[T, None, None]:
    """Yield ``items`` as a second thread produces them; an exception there is raised here.

    Stopping early (``close()`` or garbage collection of this generator) stops the producer and closes
    ``items`` in the producer's thread, which is the one iterating it.
    """
    q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def work() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(("data", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("end", None))
        except BaseException as exc:  # handed to the consumer, which raises it
            q.put(("error", exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "data":
                yield item
            elif kind == "end":
                return
            else:
                raise item
    finally:
        stop.set()
        thread.join()
