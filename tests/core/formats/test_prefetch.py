"""``iterate_ahead``: the producer thread ends with the consumer, however either of them stops; ``map_ahead``:
results in order, a bounded window.

Each case runs in a guard thread joined with a timeout: a hand-over that blocks for good shows as a guard
still alive, not as a test run that never ends."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from pypto_core.formats.prefetch import iterate_ahead

GUARD_S = 10.0


def _guarded(case: Callable[[], None]) -> None:
    failure: list[BaseException] = []

    def run() -> None:
        try:
            case()
        except BaseException as exc:  # re-raised in the test's thread
            failure.append(exc)

    guard = threading.Thread(target=run, daemon=True)
    guard.start()
    guard.join(GUARD_S)
    assert not guard.is_alive(), "iterate_ahead hung"
    if failure:
        raise failure[0]


def _producers(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


class _Items:
    """Yields 1 and 2, then ends or fails; records when it got there and whether it was closed."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.finished = threading.Event()
        self.closed = False

    def gen(self) -> Iterator[int]:
        try:
            yield 1
            yield 2
            self.finished.set()
            if self.fail:
                raise RuntimeError("the read broke")
        finally:
            self.closed = True


@pytest.mark.parametrize("fail", [True, False], ids=["producer_fails", "producer_ends"])
def test_consumer_stops_while_the_queue_is_full(fail: bool) -> None:
    # depth 1: the consumer takes 1 and stops; the producer queues 2 (the queue is full), then fails or ends
    # and has no room to say so. Before, that hand-over blocked with no timeout and close() joined it forever.
    items = _Items(fail)
    name = f"test-prefetch-{'fail' if fail else 'end'}"
    source = items.gen()

    def case() -> None:
        ahead = iterate_ahead(source, depth=1, name=name)
        assert next(ahead) == 1
        assert items.finished.wait(GUARD_S)
        time.sleep(0.3)  # the producer is now waiting for room for its last word
        ahead.close()

    _guarded(case)
    assert not _producers(name), "the producer thread is left behind"
    assert items.closed


def test_a_failure_that_waited_for_room_still_reaches_the_consumer() -> None:
    items = _Items(fail=True)
    name = "test-prefetch-late-error"
    got: list[int] = []

    def case() -> None:
        ahead = iterate_ahead(items.gen(), depth=1, name=name)
        got.append(next(ahead))
        assert items.finished.wait(GUARD_S)
        time.sleep(0.3)  # the failure waits behind the queued 2
        got.append(next(ahead))
        with pytest.raises(RuntimeError, match="the read broke"):
            next(ahead)

    _guarded(case)
    assert got == [1, 2]
    assert not _producers(name)


def test_consumer_exit_stops_an_endless_producer() -> None:
    # the consumer leaves a loop early (break, then the generator is closed): the producer of an endless
    # stream stops at its next hand-over and its source is closed in its own thread
    closed_in: list[str] = []
    name = "test-prefetch-endless"

    def endless() -> Iterator[int]:
        try:
            n = 0
            while True:
                n += 1
                yield n
        finally:
            closed_in.append(threading.current_thread().name)

    def case() -> None:
        ahead = iterate_ahead(endless(), depth=2, name=name)
        for n in ahead:
            if n == 5:
                break
        ahead.close()

    _guarded(case)
    assert closed_in == [name]
    assert not _producers(name)


def test_map_ahead_keeps_the_items_order_and_a_bounded_window() -> None:
    """``map_ahead``: results in the items' order whatever order the threads finish in, never more than
    ``ahead`` items submitted besides the one the consumer holds, and a failing item's exception raised at
    that item."""
    from concurrent.futures import ThreadPoolExecutor

    from pypto_core.formats.prefetch import map_ahead

    lock = threading.Lock()
    state = {"started": 0, "taken": 0, "most_ahead": 0}

    def work(i: int) -> int:
        with lock:
            state["started"] += 1
            state["most_ahead"] = max(state["most_ahead"], state["started"] - state["taken"])
        time.sleep(0.002 * (i % 3))  # later items often finish first
        if i == 7:
            raise ValueError("item 7 broke")
        return i * i

    def case() -> None:
        got: list[int] = []
        with ThreadPoolExecutor(max_workers=3) as pool:
            with pytest.raises(ValueError, match="item 7"):
                for value in map_ahead(pool, work, range(10), ahead=2):
                    got.append(value)
                    with lock:
                        state["taken"] += 1
        assert got == [i * i for i in range(7)]
        assert state["most_ahead"] <= 3  # two ahead, and the one the consumer holds
        assert state["started"] <= 9  # items after the failure (and the window) are never started

    _guarded(case)
