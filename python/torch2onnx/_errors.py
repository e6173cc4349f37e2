"""The torch2onnx.Error hierarchy: one class per exit code of the command line.

Every error carries the CLI's one-line ``message``, its ``hint`` (may be empty) and the
``exit_code`` the command line would exit with; ``str(error)`` is the message, followed by
``hint: ...`` on a second line when there is one, as the CLI prints them.
"""


try:  # torch.onnx's exporter errors, so code written against torch.onnx.export catches ours too
    from torch.onnx.errors import OnnxExporterError as _ExporterError
    from torch.onnx.errors import SymbolicValueError as _SymbolicValueError
    from torch.onnx.errors import UnsupportedOperatorError as _UnsupportedOperatorError
except ImportError:  # pragma: no cover - torch without torch.onnx
    class _ExporterError(RuntimeError):
        pass

    class _SymbolicValueError(_ExporterError):
        pass

    class _UnsupportedOperatorError(_ExporterError):
        pass


class Error(Exception):
    """A torch2onnx failure, with the CLI's message, hint and exit code."""

    exit_code = 3

    def __init__(self, message, hint="", exit_code=None):
        self.message = message
        self.hint = hint or ""
        if exit_code is not None:
            self.exit_code = exit_code
        # Not super(): torch.onnx's error classes among the bases take other arguments.
        Exception.__init__(self, message)

    def __str__(self):
        return self.message + (f"\nhint: {self.hint}" if self.hint else "")


class MismatchError(Error):
    """The ONNX model does not match PyTorch (exit code 1)."""

    exit_code = 1


class UsageError(Error, ValueError):
    """Arguments that do not fit the model or each other (exit code 2)."""

    exit_code = 2


class ModelRunError(UsageError, RuntimeError):
    """The model itself fails on the example args (exit code 2): PyTorch's error, so also a
    RuntimeError, as calling the model or torch.onnx.export would raise."""


class UnsupportedError(Error, _UnsupportedOperatorError, _SymbolicValueError):
    """Something torch2onnx cannot convert or run (exit code 3). Also torch.onnx's errors for what
    it cannot export: OnnxExporterError (a RuntimeError) and its UnsupportedOperatorError (an op
    without a conversion) and SymbolicValueError (a value of a kind ONNX cannot hold)."""

    exit_code = 3


class InputError(Error):
    """An unreadable or invalid model or tensor file (exit code 4)."""

    exit_code = 4


_BY_CODE = {1: MismatchError, 2: UsageError, 3: UnsupportedError, 4: InputError}


def from_native(code, message, hint):
    """The exception for an error raised by the C++ libraries (called by the native module)."""
    if code == 2 and message.startswith("the model fails on"):
        return ModelRunError(message, hint, code)
    return _BY_CODE.get(code, Error)(message, hint, code)


class ConversionWarning(UserWarning):
    """A warning of the converter (training-mode submodules, baked behaviour, stand-in kernels, ...)."""
