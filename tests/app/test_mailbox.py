"""The mailbox that carries engine events to the event loop: nothing lost, order kept, bursts coalesced."""

import asyncio
import gc
import threading
import weakref

from app.mailbox import mailbox


def test_events_from_threads_arrive_in_order_with_few_wake_ups():
    async def main():
        loop = asyncio.get_running_loop()
        box = mailbox(loop)
        assert mailbox(loop) is box
        got, wake_ups = [], 0
        schedule = loop.call_soon_threadsafe

        def counting(*args):
            nonlocal wake_ups
            wake_ups += 1
            return schedule(*args)

        loop.call_soon_threadsafe = counting
        done = asyncio.Event()

        def receive(item):
            got.append(item)
            if len(got) == 2000:
                done.set()

        def engine():  # bursts of 100 events, like decode steps of a 100-row batch
            for step in range(20):
                for row in range(100):
                    box.post(receive, step * 100 + row)

        thread = threading.Thread(target=engine)
        thread.start()
        await asyncio.wait_for(done.wait(), 10)
        thread.join()
        del loop.call_soon_threadsafe
        return got, wake_ups

    got, wake_ups = asyncio.run(main())
    assert got == list(range(2000))
    assert wake_ups < 2000 / 10  # coalesced: far fewer wake-ups than events


def test_a_finished_loop_and_its_mailbox_are_freed():
    async def main():
        mailbox(asyncio.get_running_loop())
        return weakref.ref(asyncio.get_running_loop())

    ref = asyncio.run(main())
    gc.collect()
    assert ref() is None
