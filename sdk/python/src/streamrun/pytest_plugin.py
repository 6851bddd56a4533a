"""The pytest plugin of the streamrun SDK: the ``streamrun_handler``
fixture. Installing the SDK registers it (the ``pytest11`` entry point),
so a test only names the fixture; see ``streamrun.testing``."""

from __future__ import annotations

import pytest

from . import testing


@pytest.fixture
def streamrun_handler():
    """Makes a handler under test, ``streamrun_handler(handler, config=...,
    ...)`` taking what ``streamrun.testing.LocalHandler`` takes, and closes
    each at the end of the test."""
    yield from testing.handlers()
