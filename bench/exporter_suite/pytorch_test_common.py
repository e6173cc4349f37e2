"""Stand-in for PyTorch's test/onnx/pytorch_test_common.py: the skip decorators and RNN sizes."""
import functools
import unittest
from typing import Optional

import torch

torch.set_default_tensor_type("torch.FloatTensor")

BATCH_SIZE = 2
RNN_BATCH_SIZE = 7
RNN_SEQUENCE_LENGTH = 11
RNN_INPUT_SIZE = 5
RNN_HIDDEN_SIZE = 3


def _skip_if(skip, reason):
    """A test decorator skipping when skip(test) holds."""
    def dec(func):
        @functools.wraps(func)
        def wrapper(self, *a, **k):
            if skip(self):
                raise unittest.SkipTest(reason)
            return func(self, *a, **k)
        return wrapper
    return dec


def _setting(attr):
    """A test decorator turning the test's check `attr` off."""
    def dec(func):
        @functools.wraps(func)
        def wrapper(self, *a, **k):
            setattr(self, attr, False)
            return func(self, *a, **k)
        return wrapper
    return dec


skipIfNoCuda = _skip_if(lambda self: True, "CUDA is not available")
skipIfNoBFloat16Cuda = _skip_if(lambda self: True, "CUDA is not available")
skipIfTravis = _skip_if(lambda self: False, "")
skipShapeChecking = _setting("check_shape")
skipDtypeChecking = _setting("check_dtype")
skipIfQuantizationBackendQNNPack = _skip_if(lambda self: torch.backends.quantized.engine == "qnnpack", "qnnpack")


def skipIfUnsupportedMinOpsetVersion(v):
    return _skip_if(lambda self: self.opset_version < v, f"opset < {v}")


def skipIfUnsupportedMaxOpsetVersion(v):
    return _skip_if(lambda self: self.opset_version > v, f"opset > {v}")


def skipIfUnsupportedOpsetVersion(versions):
    return _skip_if(lambda self: self.opset_version in versions, f"opset in {versions}")


def skipForAllOpsetVersions():
    return _skip_if(lambda self: bool(self.opset_version), "every opset")


def _before(v, self):
    return v is None or self.opset_version < v


def skipTraceTest(skip_before_opset_version: Optional[int] = None, reason: str = ""):
    return _skip_if(lambda self: _before(skip_before_opset_version, self) and not self.is_script, f"traced: {reason}")


def skipScriptTest(skip_before_opset_version: Optional[int] = None, reason: str = ""):
    return _skip_if(lambda self: _before(skip_before_opset_version, self) and self.is_script, f"scripted: {reason}")


def flatten(x):
    from torch.autograd import function
    return tuple(function._iter_filter(lambda o: isinstance(o, torch.Tensor))(x))
