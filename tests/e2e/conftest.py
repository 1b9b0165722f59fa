"""Shared fixtures for the end-to-end tests (real Hermes / Claude Code / Codex).

Every test collected from this folder gets the ``e2e`` marker, so
``pytest -m "not e2e"`` skips them all. ``mock_llm`` is a fresh
:class:`MockLLM` on 127.0.0.1 per test, stopped afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .mockserver import MockLLM

_HERE = Path(__file__).resolve().parent


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "e2e: end-to-end test driving a real agent CLI against a local mock model API")


def pytest_collection_modifyitems(config, items):
    for item in items:
        try:
            path = Path(str(item.path)).resolve()
        except Exception:
            continue
        if _HERE == path or _HERE in path.parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def mock_llm():
    """A running MockLLM (reply "OK"), stopped when the test ends."""
    with MockLLM() as mock:
        yield mock
