"""torch2onnx.InferenceSession: torch2onnx's CPU runtime with onnxruntime's Python interface."""
import os

from . import _torch2onnx as _native
from ._errors import UsageError


class GraphOptimizationLevel:
    """onnxruntime's levels, accepted in SessionOptions. torch2onnx's runtime applies its fast
    paths (fused kernels, packed weights) at every level but ORT_DISABLE_ALL, which runs each node
    on its plain kernel."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode:
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """onnxruntime.SessionOptions' fields that code written for onnxruntime sets.

    intra_op_num_threads (0: all cores) is the session's threads; graph_optimization_level
    ORT_DISABLE_ALL turns the fast paths off; register_custom_ops_library(path) loads a runtime
    plugin. The other fields are kept so that such code runs; they do not change what runs."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.enable_profiling = False
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.optimized_model_filepath = ""
        self.profile_file_prefix = "onnxruntime_profile_"
        self._plugins = []
        self._config = {}

    def register_custom_ops_library(self, path):
        self._plugins.append(os.fspath(path))

    def add_session_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key):
        return self._config[key]


class ModelMetadata:
    def __init__(self, model):
        self.producer_name = model.producer_name
        self.graph_name = model.graph.name
        self.domain = model.domain
        self.description = model.doc_string
        self.graph_description = model.graph.doc_string
        self.version = model.model_version
        self.custom_metadata_map = {p.key: p.value for p in model.metadata_props}


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
        if sess_options is not None and getattr(sess_options, "graph_optimization_level", None) == 0:
            fast_paths = False  # ORT_DISABLE_ALL (onnxruntime's enum or ours)
        plugins = list(plugins or []) + list(getattr(sess_options, "_plugins", []))
        self._options = sess_options if sess_options is not None else SessionOptions()
        self._model = path_or_bytes
        for p in plugins:
            _native.load_plugin(os.fspath(p))
        model = path_or_bytes if isinstance(path_or_bytes, bytes) else os.fspath(path_or_bytes)
        self._session = _native.Session(model, threads, fast_paths)

    def get_inputs(self):
        return self._session.get_inputs()

    def get_providers(self):
        return ["CPUExecutionProvider"]

    def get_provider_options(self):
        return {"CPUExecutionProvider": {}}

    def get_session_options(self):
        return self._options

    def get_overridable_initializers(self):
        return []

    def get_modelmeta(self):
        """producer_name, graph_name, domain, description, version, custom_metadata_map."""
        import onnx
        m = self._model
        model = onnx.load_from_string(m) if isinstance(m, bytes) else onnx.load(os.fspath(m), load_external_data=False)
        return ModelMetadata(model)

    def end_profiling(self):
        return ""

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
