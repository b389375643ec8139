"""The browser modules' shared fixture: one headless Chromium per module (a module's tests open their own pages or
contexts in it)."""

from __future__ import annotations

import pytest

from tests.browser.harness import launch_browser


@pytest.fixture(scope="module")
def browser():
    yield from launch_browser()
