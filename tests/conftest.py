"""Fixtures every test directory may use."""

from __future__ import annotations

import pytest

from tideflow.framework.modes import base, set_base


@pytest.fixture
def local_dispatch():
    """The dispatcher's base as the test found it: making a global tensor installs the
    global mode for the rest of the process, and other tests run without it."""
    before = base()
    yield
    set_base(before)
