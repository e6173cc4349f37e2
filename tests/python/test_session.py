"""torch2onnx.InferenceSession: onnxruntime's interface, NumPy without copies, I/O binding into the
caller's arrays with no allocation per run, and runs from several Python threads."""
import threading

import numpy as np
import pytest
import torch

import ort
import torch2onnx


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return self.fc(y.mean(dim=(2, 3))), y


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    torch.manual_seed(0)
    net = Net().eval()
    path = tmp_path_factory.mktemp("session") / "net.onnx"
    torch2onnx.export(net, torch.randn(2, 3, 10, 10), path, input_names=["image"], output_names=["logits", "features"],
                      dynamic_axes={"image": {0: "batch"}})
    return net, path


def test_describes_inputs_and_outputs_as_onnxruntime(model):
    _, path = model
    s = torch2onnx.InferenceSession(path)
    (i,) = s.get_inputs()
    assert (i.name, i.type, i.shape) == ("image", "tensor(float)", ["batch", 3, 10, 10])
    o = s.get_outputs()
    assert [x.name for x in o] == ["logits", "features"]
    assert o[0].shape == ["batch", 5] and o[1].shape == ["batch", 8, 10, 10]


def test_run_matches_pytorch_and_onnx_runtime(model):
    net, path = model
    s = torch2onnx.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((3, 3, 10, 10), dtype=np.float32)
    logits, feats = s.run(None, {"image": x})
    with torch.no_grad():
        want = net(torch.from_numpy(x))
    np.testing.assert_allclose(logits, want[0].numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(feats, want[1].numpy(), rtol=1e-4, atol=1e-5)
    o_logits, o_feats = ort.run(path, [x])
    np.testing.assert_allclose(logits, o_logits, rtol=1e-4, atol=1e-5)
    (only,) = s.run(["features"], {"image": x})
    np.testing.assert_array_equal(only, feats)


def test_inputs_are_read_in_place_and_outputs_not_copied(model):
    _, path = model
    s = torch2onnx.InferenceSession(path)
    x = np.random.default_rng(2).standard_normal((1, 3, 10, 10), dtype=np.float32)
    logits, _ = s.run(None, {"image": x})
    # The output array is a view of the runtime's buffer (kept alive by its base), not a copy.
    assert not logits.flags.owndata and logits.base is not None
    # Strided inputs are accepted (copied to contiguous memory first) and give the same result.
    wide = np.zeros((1, 3, 10, 20), np.float32)
    wide[..., ::2] = x
    strided, _ = s.run(None, {"image": wide[..., ::2]})
    np.testing.assert_array_equal(strided, logits)


def test_io_binding_writes_into_the_same_arrays_without_allocating(model):
    net, path = model
    s = torch2onnx.InferenceSession(path, threads=1)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 10, 10), dtype=np.float32)
    logits = np.empty((4, 5), np.float32)
    io = s.io_binding()
    io.bind_input("image", x)
    io.bind_output("logits", logits)
    io.bind_output("features", (4, 8, 10, 10))  # allocated once by the binding
    s.run_with_iobinding(io)
    feats = io.get_outputs()[1]
    ptrs = (logits.ctypes.data, feats.ctypes.data)
    after_first = s.fresh_buffers
    for k in range(20):
        x[...] = rng.standard_normal(x.shape, dtype=np.float32)  # new values in the bound input
        s.run_with_iobinding(io)
        out = io.get_outputs()
        assert out[0] is logits and (out[0].ctypes.data, out[1].ctypes.data) == ptrs
        with torch.no_grad():
            want = net(torch.from_numpy(x.copy()))
        np.testing.assert_allclose(logits, want[0].numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(out[1], want[1].numpy(), rtol=1e-4, atol=1e-5)
    assert s.fresh_buffers == after_first, "runs after the first took new buffers from the allocator"
    # Without binding, kept outputs hold runtime buffers, so the counter moves: it measures something.
    kept = [s.run(None, {"image": x}) for _ in range(3)]
    assert s.fresh_buffers > after_first and len(kept) == 3


def test_io_binding_rejects_mismatched_buffers(model):
    _, path = model
    s = torch2onnx.InferenceSession(path)
    io = s.io_binding()
    with pytest.raises(torch2onnx.UsageError, match="dtype float64"):
        io.bind_output("logits", np.empty((1, 5)))
    with pytest.raises(torch2onnx.UsageError, match="C-contiguous"):
        io.bind_output("logits", np.empty((3, 10), np.float32)[:, ::2])
    with pytest.raises(torch2onnx.UsageError, match="no output named"):
        io.bind_output("nope", (1, 5))
    io.bind_input("image", np.zeros((2, 3, 10, 10), np.float32))
    io.bind_output("logits", np.empty((1, 5), np.float32))  # the batch is 2
    with pytest.raises(torch2onnx.UsageError, match="bound buffer is f32\\[1x5\\]"):
        s.run_with_iobinding(io)
    other = torch2onnx.InferenceSession(path).io_binding()
    with pytest.raises(torch2onnx.UsageError, match="another session"):
        s.run_with_iobinding(other)


def test_runs_from_several_python_threads(model):
    _, path = model
    s = torch2onnx.InferenceSession(path, threads=1)
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((b, 3, 10, 10), dtype=np.float32) for b in (1, 2, 3, 5)]
    want = [s.run(None, {"image": x}) for x in xs]
    bad = []

    def work(t):
        for i in range(25):
            k = (t + i) % len(xs)
            got = s.run(None, {"image": xs[k]})
            if not all(np.array_equal(g, w) for g, w in zip(got, want[k])):
                bad.append((t, i))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not bad


def test_model_bytes_and_types(tmp_path):
    class Ints(torch.nn.Module):
        def forward(self, a, m):
            return a * 2, m.logical_not()

    torch2onnx.export(Ints(), (torch.arange(6).reshape(2, 3), torch.tensor([True, False])), tmp_path / "i.onnx")
    s = torch2onnx.InferenceSession((tmp_path / "i.onnx").read_bytes())
    a, m = s.run(None, {"a": np.arange(6, dtype=np.int64).reshape(2, 3), "m": np.array([True, False])})
    assert a.dtype == np.int64 and a.tolist() == [[0, 2, 4], [6, 8, 10]]
    assert m.dtype == np.bool_ and m.tolist() == [False, True]


def test_session_options_and_onnxruntime_session_methods(model):
    net, path = model
    so = torch2onnx.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = torch2onnx.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    plain = torch2onnx.InferenceSession(path, sess_options=so)
    fast = torch2onnx.InferenceSession(path)
    x = np.random.default_rng(2).standard_normal((2, 3, 10, 10), dtype=np.float32)
    a, b = plain.run(None, {"image": x}), fast.run(None, {"image": x})
    with torch.no_grad():
        want = net(torch.from_numpy(x))
    for got in (a, b):
        np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-4, atol=1e-5)
    assert plain.get_session_options() is so
    assert plain.get_providers() == ["CPUExecutionProvider"]
    assert plain.get_overridable_initializers() == []
    meta = fast.get_modelmeta()
    assert meta.producer_name == "torch2onnx" and isinstance(meta.custom_metadata_map, dict)
    with open(path, "rb") as f:
        assert torch2onnx.InferenceSession(f.read()).get_modelmeta().graph_name == meta.graph_name
