"""torch2onnx.InferenceSession: torch2onnx's CPU runtime with onnxruntime's Python interface."""
import os

from . import _torch2onnx as _native
from ._errors import UsageError


class InferenceSession:
    """Runs an ONNX model (a path or its bytes) on torch2onnx's runtime.

    Like onnxruntime.InferenceSession: ``run(output_names, {name: array})`` returns a list of
    NumPy arrays (outputs share the runtime's memory: no copy), ``get_inputs()`` and
    ``get_outputs()`` describe the model (``.name``, ``.type``, ``.shape``), and ``io_binding()`` /
    ``run_with_iobinding()`` write into arrays bound once, so a loop allocates nothing after its
    first run. C-contiguous inputs are read in place. A session may be run from several threads
    at once (runs release the GIL).

    threads: threads per run (None: all cores). plugins: runtime plugin .so files with kernels for
    custom ops. providers: accepted for onnxruntime compatibility; only the CPU exists here.
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, *, threads=None, fast_paths=True,
                 plugins=None):
        for p in providers or []:
            name = p[0] if isinstance(p, tuple) else p
            if name != "CPUExecutionProvider":
                raise UsageError(f"provider {name} is not available: torch2onnx runs on the CPU",
                                 "leave providers out or pass ['CPUExecutionProvider']")
        if threads is None and sess_options is not None:
            threads = getattr(sess_options, "intra_op_num_threads", 0) or None
        for p in plugins or []:
            _native.load_plugin(os.fspath(p))
        model = path_or_bytes if isinstance(path_or_bytes, bytes) else os.fspath(path_or_bytes)
        self._session = _native.Session(model, threads, fast_paths)

    def get_inputs(self):
        return self._session.get_inputs()

    def get_outputs(self):
        return self._session.get_outputs()

    def run(self, output_names, input_feed, run_options=None):
        """The outputs named (all when None) for the feeds {input name: array}, as NumPy arrays."""
        return self._session.run(output_names, dict(input_feed))

    def io_binding(self):
        return self._session.io_binding()

    def run_with_iobinding(self, iobinding, run_options=None):
        self._session.run_with_iobinding(iobinding)

    @property
    def fresh_buffers(self):
        """Activation buffers taken from the system allocator so far (stops growing in a steady loop)."""
        return self._session.fresh_buffers
