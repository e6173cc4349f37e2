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


def _skipper(condition, reason):
    def decorator(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            if condition():
                raise unittest.SkipTest(reason)
            return f(*args, **kwargs)
        return wrapper
    return decorator


skipIfNoCuda = _skipper(lambda: True, "CUDA is not available")
skipIfTravis = _skipper(lambda: False, "")
skipIfNoBFloat16Cuda = _skipper(lambda: True, "no CUDA")


def skipIfUnsupportedMinOpsetVersion(v):
    def dec(func):
        @functools.wraps(func)
        def wrapper(self, *a, **k):
            if self.opset_version < v:
                raise unittest.SkipTest("opset")
            return func(self, *a, **k)
        return wrapper
    return dec


def skipIfUnsupportedMaxOpsetVersion(v):
    def dec(func):
        @functools.wraps(func)
        def wrapper(self, *a, **k):
            if self.opset_version > v:
                raise unittest.SkipTest("opset")
            return func(self, *a, **k)
        return wrapper
    return dec


def skipForAllOpsetVersions():
    def dec(func):
        @functools.wraps(func)
        def wrapper(self, *a, **k):
            if self.opset_version:
                raise unittest.SkipTest("all opsets")
            return func(self, *a, **k)
        return wrapper
    return dec


def skipTraceTest(skip_before_opset_version: Optional[int] = None, reason: str = ""):
    def dec(func):
        @functools.wraps(func)
        def wrapper(self, *a, **k):
            skip = True if skip_before_opset_version is None else self.opset_version < skip_before_opset_version
            if skip and not self.is_script:
                raise unittest.SkipTest("trace skipped")
            return func(self, *a, **k)
        return wrapper
    return dec


def skipScriptTest(skip_before_opset_version: Optional[int] = None, reason: str = ""):
    def dec(func):
        @functools.wraps(func)
        def wrapper(self, *a, **k):
            skip = True if skip_before_opset_version is None else self.opset_version < skip_before_opset_version
            if skip and self.is_script:
                raise unittest.SkipTest("script skipped")
            return func(self, *a, **k)
        return wrapper
    return dec


def skipIfUnsupportedOpsetVersion(versions):
    def dec(func):
        @functools.wraps(func)
        def wrapper(self, *a, **k):
            if self.opset_version in versions:
                raise unittest.SkipTest("opset")
            return func(self, *a, **k)
        return wrapper
    return dec


def skipShapeChecking(func):
    @functools.wraps(func)
    def wrapper(self, *a, **k):
        self.check_shape = False
        return func(self, *a, **k)
    return wrapper


def skipDtypeChecking(func):
    @functools.wraps(func)
    def wrapper(self, *a, **k):
        self.check_dtype = False
        return func(self, *a, **k)
    return wrapper


def skipIfQuantizationBackendQNNPack(func):
    @functools.wraps(func)
    def wrapper(self, *a, **k):
        if torch.backends.quantized.engine == "qnnpack":
            raise unittest.SkipTest("qnnpack")
        return func(self, *a, **k)
    return wrapper


def flatten(x):
    from torch.autograd import function
    return tuple(function._iter_filter(lambda o: isinstance(o, torch.Tensor))(x))
