"""Shared fixtures of the Python tests (run by ctest, label `python`, with PYTHONPATH set to the
build's python/ folder)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def cbr_plugin():
    """The example plugin's Cbr kernel registered as onnx_test::cbr (cbr_alias_plugin.cpp)."""
    path = os.environ.get("T2O_CBR_ALIAS_PLUGIN")
    if not path:
        pytest.fail("T2O_CBR_ALIAS_PLUGIN is not set: run the Python tests through ctest")
    return path


@pytest.fixture
def cli():
    path = os.environ.get("T2O_CLI")
    if not path:
        pytest.fail("T2O_CLI is not set: run the Python tests through ctest")
    return path
