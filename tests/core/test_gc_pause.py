"""core.gc_pause: the collector is paused inside, enabled again after, nesting and threads."""

import gc
import threading

from core.gc_pause import gc_paused, gc_paused_call


def test_the_collector_is_paused_inside_and_enabled_after():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block is still open
    assert gc.isenabled()


def test_an_error_inside_still_enables_it():
    try:
        with gc_paused():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()


def test_a_process_running_without_the_collector_keeps_it_off():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_blocks_in_threads_leave_it_enabled():
    inside = threading.Barrier(2)
    leave_first = threading.Event()
    seen = []

    def first():
        with gc_paused():
            inside.wait()
            leave_first.wait()
        seen.append(gc.isenabled())  # the second block is still open

    def second():
        with gc_paused():
            inside.wait()
            leave_first.set()
            first_thread.join()

    first_thread = threading.Thread(target=first)
    second_thread = threading.Thread(target=second)
    first_thread.start()
    second_thread.start()
    second_thread.join()
    assert seen == [False]
    assert gc.isenabled()


def test_the_decorator_pauses_the_call():
    @gc_paused_call
    def state(x):
        return x, gc.isenabled()

    assert state(1) == (1, False)
    assert gc.isenabled()
