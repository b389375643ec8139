"""The dashboard's queue paced (app.web.server.pace_queue): Gradio's own loops, run on their own, wait what we set between
their looks for work, so an idle dashboard does not look every millisecond."""

from __future__ import annotations

import asyncio

import gradio as gr

from app.web.server import IDLE_LOOK_SECONDS, PROGRESS_LOOK_SECONDS, pace_queue


def _waits_of(loop_name: str, seconds: float = 0.3) -> list[float]:
    """The waits that Gradio's queue loop ``loop_name`` asks of asyncio.sleep while idle for ``seconds``."""
    with gr.Blocks() as demo:
        gr.Button("go").click(lambda: None)
    queue = pace_queue(demo.queue())._queue
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded_sleep(delay, *args, **kwargs):
        waits.append(delay)
        return await real_sleep(delay, *args, **kwargs)

    async def idle_for_a_while():
        task = asyncio.ensure_future(getattr(queue, loop_name)())
        await real_sleep(seconds)
        queue.stopped = True
        await task

    asyncio.sleep = recorded_sleep
    try:
        asyncio.run(idle_for_a_while())
    finally:
        asyncio.sleep = real_sleep
    return waits


def test_the_idle_queue_looks_for_events_at_the_dashboards_pace():
    waits = _waits_of("start_processing")
    assert waits and set(waits) == {IDLE_LOOK_SECONDS}
    # so a 0.3 s idle spell is a dozen looks, not Gradio's 300
    assert len(waits) <= 0.3 / IDLE_LOOK_SECONDS + 2


def test_the_idle_queue_looks_for_progress_at_the_dashboards_pace():
    waits = _waits_of("start_progress_updates")
    assert waits and set(waits) == {PROGRESS_LOOK_SECONDS}
    assert len(waits) <= 0.3 / PROGRESS_LOOK_SECONDS + 2
