"""Work done in other threads, a bounded number of items ahead of the consumer.

File reads, zlib, the native scanners, numpy's sorts and searches and Arrow's joins release the GIL, so
reading the next chunk, scanning the next batch or binding the next bucket overlaps with the consumer's
work. ``iterate_ahead`` produces an iterator's items in a second thread; ``map_ahead`` maps a function
over items in a pool's threads. Either way at most ``depth`` / ``ahead`` items are in flight, which bounds
the memory they hold.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# How often a producer waiting for room in the queue looks whether the consumer has stopped: the most a
# close() waits for the producer once it is between items.
_POLL_S = 0.05


def iterate_ahead(items: Iterator[T], *, depth: int, name: str) -> Generator[T, None, None]:
    """Yield ``items`` as a second thread produces them; an exception there is raised here.

    Stopping early (``close()`` or garbage collection of this generator) stops the producer and closes
    ``items`` in the producer's thread, which is the one iterating it. Every hand-over (an item, the end, a
    failure) waits for room only while the consumer listens: a producer that ends or fails after the
    consumer stopped, with the queue full, returns instead of blocking the consumer's ``close()`` for good.
    An item ``items`` is still computing is waited for (its own read cannot be interrupted from here).
    """
    q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def hand_over(entry: tuple[str, Any]) -> bool:
        """Queue ``entry`` once there is room; False when the consumer stopped first."""
        while not stop.is_set():
            try:
                q.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if not hand_over(("data", item)):
                    return
            hand_over(("end", None))
        except BaseException as exc:  # handed to the consumer, which raises it (dropped if it has stopped)
            hand_over(("error", exc))
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


def map_ahead(pool: Executor, fn: Callable[[T], R], items: Iterable[T], *,
              ahead: int) -> Generator[R, None, None]:
    """``fn(item)`` of each item, computed in ``pool``'s threads and yielded in the items' order; besides the
    result the consumer holds, at most ``ahead`` items are submitted (running, or done and waiting). An
    exception in ``fn`` is raised here, at its item. Stopping early cancels the items not started; the
    pool's own shutdown waits for the others."""
    pending: deque[Future[R]] = deque()
    rest = iter(items)
    try:
        for item in rest:
            pending.append(pool.submit(fn, item))
            if len(pending) >= ahead:
                break
        while pending:
            result = pending.popleft().result()
            for item in rest:  # keep the window full while the consumer works
                pending.append(pool.submit(fn, item))
                break
            yield result
    finally:
        for future in pending:
            future.cancel()
