"""The package imports, has a version, and maps C++ errors to the torch2onnx.Error hierarchy."""
import subprocess
import sys

import numpy as np
import pytest

import torch2onnx


def test_version_matches_the_command_line(cli):
    out = subprocess.run([cli, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"torch2onnx {torch2onnx.__version__}"


def test_import_from_a_fresh_interpreter():
    r = subprocess.run([sys.executable, "-c", "import torch2onnx; print(torch2onnx.__version__)"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == torch2onnx.__version__


def test_errors_carry_the_cli_message_hint_and_exit_code(tmp_path, cli):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(torch2onnx.InputError) as e:
        torch2onnx.InferenceSession(bad)
    assert e.value.exit_code == 4
    r = subprocess.run([cli, "run", str(bad)], capture_output=True, text=True)
    assert r.returncode == 4
    # The CLI prints "error: MESSAGE" and, when there is one, "hint: HINT".
    lines = r.stderr.strip().splitlines()
    assert lines[0] == f"error: {e.value.message}"
    if e.value.hint:
        assert lines[1] == f"hint: {e.value.hint}"
        assert str(e.value) == f"{e.value.message}\nhint: {e.value.hint}"
    assert isinstance(e.value, torch2onnx.Error)


def test_error_classes_by_exit_code():
    assert issubclass(torch2onnx.UsageError, ValueError)
    for cls, code in [(torch2onnx.MismatchError, 1), (torch2onnx.UsageError, 2), (torch2onnx.UnsupportedError, 3),
                      (torch2onnx.InputError, 4)]:
        assert issubclass(cls, torch2onnx.Error) and cls.exit_code == code


def test_usage_errors_from_the_runtime(tmp_path):
    import torch
    m = torch.jit.trace(torch.nn.Linear(3, 2).eval(), torch.zeros(1, 3))
    r = torch2onnx.export(m, (torch.zeros(1, 3),), tmp_path / "l.onnx", input_names=["x"])
    sess = torch2onnx.InferenceSession(r.path)
    with pytest.raises(torch2onnx.UsageError, match="element type f64") as e:
        sess.run(None, {"x": np.zeros((1, 3))})
    assert e.value.exit_code == 2
    with pytest.raises(torch2onnx.UsageError, match="no input named 'y'"):
        sess.run(None, {"y": np.zeros((1, 3), np.float32)})
