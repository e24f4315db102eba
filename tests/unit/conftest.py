"""The unit tier runs without Spark and without processes: a test here that asks for the `spark` fixture fails,
with where it belongs."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _without_spark(request):
    if "spark" in request.fixturenames:
        pytest.fail("tests/unit runs without Spark: a test that needs it belongs in tests/spark")
