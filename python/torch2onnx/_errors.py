"""The torch2onnx.Error hierarchy: one class per exit code of the command line.

Every error carries the CLI's one-line ``message``, its ``hint`` (may be empty) and the
``exit_code`` the command line would exit with; ``str(error)`` is the message, followed by
``hint: ...`` on a second line when there is one, as the CLI prints them.
"""


class Error(Exception):
    """A torch2onnx failure, with the CLI's message, hint and exit code."""

    exit_code = 3

    def __init__(self, message, hint="", exit_code=None):
        self.message = message
        self.hint = hint or ""
        if exit_code is not None:
            self.exit_code = exit_code
        super().__init__(message)

    def __str__(self):
        return self.message + (f"\nhint: {self.hint}" if self.hint else "")


class MismatchError(Error):
    """The ONNX model does not match PyTorch (exit code 1)."""

    exit_code = 1


class UsageError(Error, ValueError):
    """Arguments that do not fit the model or each other (exit code 2)."""

    exit_code = 2


class UnsupportedError(Error):
    """Something torch2onnx cannot convert or run (exit code 3)."""

    exit_code = 3


class InputError(Error):
    """An unreadable or invalid model or tensor file (exit code 4)."""

    exit_code = 4


_BY_CODE = {1: MismatchError, 2: UsageError, 3: UnsupportedError, 4: InputError}


def from_native(code, message, hint):
    """The exception for an error raised by the C++ libraries (called by the native module)."""
    return _BY_CODE.get(code, Error)(message, hint, code)


class ConversionWarning(UserWarning):
    """A warning of the converter (training-mode submodules, baked behaviour, stand-in kernels, ...)."""
