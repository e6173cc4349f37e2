"""torch2onnx.export with torch.onnx.export's arguments: the forms of args, names, dynamic_axes,
file objects, traced / scripted / saved models, Python numbers as inputs (other Python values
baked as constants), inputs the model does not read, verification."""
import io

import numpy as np
import onnx
import pytest
import torch

import ort
import torch2onnx


def dims(vi):
    return [d.dim_param if d.dim_param else d.dim_value for d in vi.type.tensor_type.shape.dim]


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.drop = torch.nn.Dropout(0.5)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


def run(path, *inputs):
    return torch2onnx.InferenceSession(path).run(None, dict(zip(
        [i.name for i in torch2onnx.InferenceSession(path).get_inputs()], inputs)))


def test_names_and_dynamic_axes_in_both_forms(tmp_path):
    torch.manual_seed(0)
    m = Mlp().eval()
    x = torch.randn(4, 6)
    p = tmp_path / "mlp.onnx"
    r = torch2onnx.export(m, x, p, input_names=["features"], output_names=["scores"],
                          dynamic_axes={"features": {0: "batch"}, "scores": {0: "batch"}}, opset_version=13)
    g = onnx.load(p).graph
    assert [i.name for i in g.input] == ["features"] and [o.name for o in g.output] == ["scores"]
    assert dims(g.input[0]) == ["batch", 6] and dims(g.output[0]) == ["batch", 3]
    assert onnx.load(p).opset_import[0].version == 13
    assert r.path == str(p) and r.input_names == ["features"] and r.output_names == ["scores"]
    x5 = torch.randn(5, 6)
    (got,) = run(p, x5.numpy())
    np.testing.assert_allclose(got, m(x5).detach().numpy(), rtol=1e-4, atol=1e-5)
    # verify matches inputs by position (the model was exported with input_names); samples after the
    # first are generated along the symbolic batch.
    v = torch2onnx.verify(m, p, x, samples=3)
    assert v.ok and sorted({o["sample"] for o in v.outputs}) == [0, 1, 2]
    assert "Mlp (traced)" in v.text and str(p) in v.text and "torch2onnx-" not in v.text
    # List form: torch.onnx's labels for inputs; the output keeps the dim that follows the input.
    p2 = tmp_path / "mlp_list.onnx"
    torch2onnx.export(m, (x,), p2, input_names=["x"], output_names=["y"], dynamic_axes={"x": [0], "y": [0]})
    g2 = onnx.load(p2).graph
    assert dims(g2.input[0]) == ["x_dynamic_axes_1", 6]
    assert dims(g2.output[0]) == ["x_dynamic_axes_1", 3]


def test_train_mode_model_exports_eval_semantics_with_a_warning(tmp_path):
    torch.manual_seed(1)
    m = Mlp()  # in train(): dropout active
    x = torch.randn(3, 6)
    with pytest.warns(torch2onnx.ConversionWarning, match="training mode"):
        r = torch2onnx.export(m, (x,), tmp_path / "t.onnx")
    assert m.training, "export must leave the model's mode as it was"
    assert any("drop" in w for w in r.warnings)
    (got,) = run(r.path, x.numpy())
    np.testing.assert_allclose(got, m.eval()(x).detach().numpy(), rtol=1e-4, atol=1e-5)


class ZeroDropout(torch.nn.Module):
    """torchvision's Swin: F.dropout(attn, p=0.0) with training left at its default, True."""

    def forward(self, x):
        return torch.nn.functional.dropout(x * 2.0, p=0.0) + 1.0


def test_dropout_of_probability_zero_is_not_reported_as_training_mode(tmp_path):
    m = ZeroDropout().eval()
    x = torch.randn(2, 5)
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = torch2onnx.export(m, (x,), tmp_path / "z.onnx")
    assert not [w for w in r.warnings if "training" in w], r.warnings
    assert not [w for w in caught if "training" in str(w.message)]
    assert "Dropout" not in {n.op_type for n in onnx.load(str(r.path)).graph.node}
    (got,) = run(r.path, x.numpy())
    np.testing.assert_allclose(got, (x * 2 + 1).numpy(), rtol=1e-6)


class FrozenBatch(torch.nn.Module):
    """Swin's window_reverse: the batch recomputed as a Python int, which tracing freezes."""

    def forward(self, w):
        b = int(w.shape[0] / 4)
        return w.view(b, -1).sum(1)


def test_trace_that_freezes_a_value_warns_with_its_line(tmp_path):
    x = torch.randn(8, 3)
    with pytest.warns(torch2onnx.ConversionWarning, match=r"tracing froze a value computed from a tensor at test_export.py:\d+"):
        r = torch2onnx.export(FrozenBatch(), (x,), tmp_path / "f.onnx", input_names=["w"],
                              dynamic_axes={"w": {0: "n"}})
    assert len([w for w in r.warnings if "tracing froze" in w]) == 1


def test_file_object_and_verify(tmp_path):
    m = Mlp().eval()
    buf = io.BytesIO()
    r = torch2onnx.export(m, (torch.randn(2, 6),), buf, verify=True)
    assert r.path is None and r.verification.ok and r.verification.outputs[0]["max_abs"] < 1e-5
    assert "output" in r.verification.text
    model = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(model)


class Tupled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = torch.nn.GRUCell(4, 5)

    def forward(self, x, state, scale: float = 1.0, mode: str = "sum"):
        h = self.cell(x, state[0])
        out = h * scale + state[1]
        return (out.sum(1) if mode == "sum" else out.mean(1)), [h, out]


def test_nested_args_python_values_and_kwargs_traced(tmp_path):
    torch.manual_seed(2)
    m = Tupled().eval()
    x, h, b = torch.randn(2, 4), torch.randn(2, 5), torch.randn(2, 5)
    p = tmp_path / "tupled.onnx"
    # A trailing dict holds keyword arguments. A Python number is an input (a 0-d double, as
    # torch.onnx makes it); a string is baked in as a constant.
    r = torch2onnx.export(m, (x, (h, b), {"scale": 0.5, "mode": "mean"}), p)
    assert r.input_names == ["x", "state.0", "state.1", "scale"]
    assert r.output_names == ["output.0", "output.1", "output.2"]
    model = onnx.load(str(p))
    assert model.graph.input[3].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    assert dims(model.graph.input[3]) == []
    feeds = {"x": x.numpy(), "state.0": h.numpy(), "state.1": b.numpy()}
    for scale in (0.5, 3.0):  # the number is read at run time, not frozen at its example value
        got = torch2onnx.InferenceSession(p).run(None, dict(feeds, scale=np.array(scale)))
        with torch.no_grad():
            want = m(x, (h, b), scale=scale, mode="mean")
        for g, w in zip(got, [want[0], *want[1]]):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)
    # The same through kwargs=, under input names of our own.
    r2 = torch2onnx.export(m, (x, (h, b)), tmp_path / "t2.onnx", kwargs={"scale": 2.0},
                           input_names=["a", "b", "c", "s"])
    assert r2.input_names == ["a", "b", "c", "s"]
    got2 = torch2onnx.InferenceSession(r2.path).run(["output.0"], {"a": x.numpy(), "b": h.numpy(), "c": b.numpy(),
                                                                   "s": np.array(2.0)})
    np.testing.assert_allclose(got2[0], m(x, (h, b), scale=2.0)[0].detach().numpy(), rtol=1e-4, atol=1e-5)
    assert torch2onnx.verify(m, r2.path, (x, (h, b)), kwargs={"scale": 2.0}).ok


class Looping(torch.nn.Module):
    def forward(self, x, steps: int, offset: float = 0.0):
        for _ in range(steps):
            x = torch.tanh(x) + offset
        return x


def test_scripted_with_python_values_and_script_modules(tmp_path):
    x = torch.randn(3, 4)
    r = torch2onnx.export(Looping(), (x, 3, 0.25), tmp_path / "loop.onnx", script=True, verify=True)
    assert r.input_names == ["x", "steps", "offset"] and r.verification.ok
    for steps in (3, 5):  # the loop count is an input of the ONNX model
        (got,) = run(r.path, x.numpy(), np.array(steps), np.array(0.25))
        np.testing.assert_allclose(got, Looping()(x, steps, 0.25).numpy(), rtol=1e-5, atol=1e-6)
    # A ScriptModule as it is, and the .pt file it saves to.
    sm = torch.jit.script(Looping())
    r2 = torch2onnx.export(sm, (x, 2), tmp_path / "loop2.onnx")
    assert r2.input_names == ["x", "steps"]
    np.testing.assert_allclose(run(r2.path, x.numpy(), np.array(2))[0], Looping()(x, 2).numpy(), rtol=1e-5, atol=1e-6)
    sm.save(str(tmp_path / "loop.pt"))
    r3 = torch2onnx.export(str(tmp_path / "loop.pt"), (x, 2), tmp_path / "loop3.onnx", input_names=["inp"])
    assert r3.input_names == ["inp", "steps"]
    np.testing.assert_allclose(run(r3.path, x.numpy(), np.array(2))[0], Looping()(x, 2).numpy(), rtol=1e-5, atol=1e-6)


class ByLevel(torch.nn.Module):
    scales = {1: 0.5, 3: 2.0}

    def forward(self, x, level: int):
        return x * self.scales[level]


def test_numbers_the_model_needs_as_python_ints_are_baked(tmp_path):
    # Traced with a tensor in place of `level`, the dict lookup fails: the number is baked in
    # instead, with a warning that says so.
    x = torch.randn(4, 6)
    with pytest.warns(torch2onnx.ConversionWarning, match="baked into the model as constants"):
        r = torch2onnx.export(ByLevel(), (x, 3), tmp_path / "level.onnx")
    assert r.input_names == ["x"]
    np.testing.assert_allclose(run(r.path, x.numpy())[0], ByLevel()(x, 3).numpy(), rtol=1e-6)


class ShapeOnly(torch.nn.Module):
    def forward(self, x, like):
        return x + torch.ones(like.shape[0], 1)


def test_inputs_only_read_for_their_shape_are_removed(tmp_path):
    # As torch.onnx does: with a fixed shape, `like` is never read, so it is not an input.
    x, like = torch.randn(3, 4), torch.randn(3, 7)
    r = torch2onnx.export(ShapeOnly(), (x, like), tmp_path / "s.onnx", input_names=["x", "like"], verify=True)
    assert r.input_names == ["x"] and r.verification.ok
    assert any("input 'like' is not read" in n for n in r.notes)
    np.testing.assert_allclose(run(r.path, x.numpy())[0], (x + 1).numpy(), rtol=1e-6)
    assert torch2onnx.verify(ShapeOnly(), r.path, (x, like)).ok
    # A dynamic axis keeps it: its size is read at run time.
    r2 = torch2onnx.export(ShapeOnly(), (x, like), tmp_path / "s2.onnx", input_names=["x", "like"],
                           dynamic_axes={"x": {0: "n"}, "like": {0: "n"}})
    assert r2.input_names == ["x", "like"]
    x5, like5 = torch.randn(5, 4), torch.randn(5, 7)
    np.testing.assert_allclose(run(r2.path, x5.numpy(), like5.numpy())[0], (x5 + 1).numpy(), rtol=1e-6)


class CountSlices(torch.nn.Module):
    def forward(self, x):
        parts = list(x.unbind())
        parts.pop(1)
        parts += [parts[0], parts[-1]]
        return torch.ones(len(parts))


def test_inputs_read_for_their_values_stay_when_conversion_does_not_need_them(tmp_path):
    # x is read (unbind) though the result follows from its fixed shape alone: torch.onnx keeps such
    # an input, and a caller feeds the model the inputs forward() takes.
    x = torch.randn(6, 2)
    r = torch2onnx.export(torch.jit.script(CountSlices()), (x,), tmp_path / "c.onnx")
    assert r.input_names == ["x"] and not any("is not read" in n for n in r.notes)
    (got,) = ort.run(r.path, [x.numpy()])
    np.testing.assert_allclose(got, np.ones(7, np.float32))


def test_matches_onnx_runtime_with_a_dynamic_batch(tmp_path):
    torch.manual_seed(3)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, stride=2), torch.nn.BatchNorm2d(6), torch.nn.ReLU(),
                            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(6, 2)).eval()
    p = tmp_path / "cnn.onnx"
    torch2onnx.export(m, torch.randn(1, 3, 16, 16), p, input_names=["img"], dynamic_axes={"img": {0: "n"}})
    x = torch.randn(3, 3, 16, 16)
    (got,) = ort.run(p, [x.numpy()])
    np.testing.assert_allclose(got, m(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def lambda_module(f):
    class Wrapped(torch.nn.Module):
        def forward(self, x):
            return f(x)
    return Wrapped()


def test_clear_errors(tmp_path):
    m = Mlp().eval()
    with pytest.raises(torch2onnx.UsageError, match="do not fit Mlp.forward") as e:
        torch2onnx.export(m, (torch.randn(2, 6), torch.randn(2)), tmp_path / "x.onnx")
    assert e.value.exit_code == 2
    with pytest.raises(torch2onnx.UsageError, match="fails on the example inputs") as e:
        torch2onnx.export(torch.jit.script(m), (torch.randn(2, 5),), tmp_path / "x.onnx")
    assert e.value.hint
    with pytest.raises(torch2onnx.UsageError, match="opset 8"):
        torch2onnx.export(m, torch.randn(1, 6), tmp_path / "x.onnx", opset_version=8)
    # A complex input has no ONNX type: an export error (torch.onnx's RuntimeError), with the way out.
    with pytest.raises(torch2onnx.UnsupportedError, match="input 'x' is a complex64 tensor") as e:
        torch2onnx.export(lambda_module(lambda x: x.real * 2), torch.randn(3, dtype=torch.cfloat), tmp_path / "c.onnx")
    assert isinstance(e.value, RuntimeError) and "view_as_real" in e.value.hint
    # As torch.onnx: a dynamic_axes name that is neither an input nor an output is warned about.
    with pytest.warns(torch2onnx.ConversionWarning, match="neither an input nor an output"):
        torch2onnx.export(m, torch.randn(1, 6), tmp_path / "warned.onnx", dynamic_axes={"nope": [0]})
    # The model's own failure on the example args is PyTorch's error: also a RuntimeError.
    with pytest.raises(RuntimeError, match="fails on the example inputs"):
        torch2onnx.export(torch.jit.script(m), (torch.randn(2, 5),), tmp_path / "x.onnx")
    with pytest.raises(torch2onnx.UsageError, match="report must be the path"):
        torch2onnx.export(m, torch.randn(1, 6), tmp_path / "x.onnx", report=3)
    with pytest.raises(torch2onnx.UsageError, match="export_params=False"):
        torch2onnx.export(m, torch.randn(1, 6), tmp_path / "x.onnx", export_params=False)
    torch2onnx.export(m, torch.randn(1, 6), tmp_path / "ok.onnx", do_constant_folding=True, verbose=False)
    assert not (tmp_path / "x.onnx").exists()


class Unexportable(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.eigvals(x).real  # complex eigenvalues: no ONNX form


def test_html_report(tmp_path):
    m = Mlp().eval()
    page = tmp_path / "r.html"
    r = torch2onnx.export(m, torch.randn(2, 6), tmp_path / "m.onnx", dynamic_axes={"x": {0: "batch"}}, verify=True,
                          report=page)
    assert r.report == str(page)
    html = page.read_text()
    # The page of `convert --report`: the graph's nodes, stage times, verification against PyTorch
    # and the output dim that follows the dynamic batch.
    assert "<svg" in html and "Gemm" in html
    for stage in ("convert (trace or script", "optimize (each pass proven", "verify against PyTorch", "save"):
        assert stage in html, stage
    assert "stayed symbolic" in html and "batch" in html
    assert "agrees" in html or "match" in html
    # A failed export writes the page with the error, and no model.
    bad = tmp_path / "bad.html"
    with pytest.raises(torch2onnx.UnsupportedError):
        torch2onnx.export(Unexportable(), torch.randn(3, 3), tmp_path / "bad.onnx", report=bad)
    assert "export failed" in bad.read_text() and "eigvals" in bad.read_text()
    assert not (tmp_path / "bad.onnx").exists()


def test_verify_reports_a_mismatch(tmp_path):
    torch.manual_seed(4)
    m = Mlp().eval()
    x = torch.randn(2, 6)
    r = torch2onnx.export(m, x, tmp_path / "m.onnx")
    with torch.no_grad():
        m.fc2.bias += 1.0  # the PyTorch model moves away from the exported one
    v = torch2onnx.verify(m, r.path, x)
    assert not v.ok and not v
    assert v.outputs[0]["max_abs"] == pytest.approx(1.0, rel=1e-4)


class ListIn(torch.nn.Module):
    def forward(self, xs, y=None, *, k: int = 2):
        return xs[0] + xs[1] * k + (0 if y is None else y)


def test_list_args_optional_tensors_and_keyword_only_parameters(tmp_path):
    x0, x1, y = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)
    r = torch2onnx.export(ListIn(), ([x0, x1],), tmp_path / "l.onnx")
    assert r.input_names == ["xs.0", "xs.1"]
    (got,) = torch2onnx.InferenceSession(r.path).run(None, {"xs.0": x0.numpy(), "xs.1": x1.numpy()})
    np.testing.assert_allclose(got, (x0 + 2 * x1).numpy(), rtol=1e-6)
    r2 = torch2onnx.export(ListIn(), ([x0, x1], {"y": y, "k": 5}), tmp_path / "l2.onnx", verify=True)
    assert r2.input_names == ["xs.0", "xs.1", "y", "k"] and r2.verification.ok


class TrainBits(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(3)
        self.drop = torch.nn.Dropout(p)

    def forward(self, x):
        return self.drop(self.bn(x))


@pytest.mark.parametrize("script", [False, True])
def test_training_mode_export(tmp_path, script):
    # training=TRAINING, as torch.onnx: batch norm normalizes by the batch's statistics, dropout stays.
    torch.manual_seed(5)
    x = torch.randn(4, 3, 5, 5) * 3 + 1
    m = TrainBits(0.0)
    with torch.no_grad():
        m.bn.running_mean.fill_(7.0)  # running statistics an eval export would use
    r = torch2onnx.export(m, x, tmp_path / "bn.onnx", training=torch.onnx.TrainingMode.TRAINING, script=script)
    assert m.training  # left in the mode it was in
    with torch.no_grad():
        want = m(x).numpy()
    (got,) = ort.run(r.path, [x.numpy()])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # Dropout in training mode: ONNX Dropout with training_mode, zeroing about p and scaling the rest.
    big = torch.rand(1, 3, 64, 64) + 1.0
    m2 = TrainBits(0.5)
    m2.bn = torch.nn.Identity()
    r2 = torch2onnx.export(m2, big, tmp_path / "drop.onnx", training=torch.onnx.TrainingMode.TRAINING, script=script)
    (y,) = ort.run(r2.path, [big.numpy()])
    kept = y != 0
    assert 0.4 < 1 - kept.mean() < 0.6
    np.testing.assert_allclose(y[kept], big.numpy()[kept] * 2, rtol=1e-6)
    # EVAL (the default) and verify with TRAINING are what they were.
    r3 = torch2onnx.export(m, x, tmp_path / "eval.onnx")
    with torch.no_grad():
        np.testing.assert_allclose(ort.run(r3.path, [x.numpy()])[0], m.eval()(x).numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(torch2onnx.UsageError, match="training-mode export is random"):
        torch2onnx.export(m, x, tmp_path / "v.onnx", training=torch.onnx.TrainingMode.TRAINING, verify=True)


def test_torch_onnx_folding_and_initializer_options(tmp_path):
    torch.manual_seed(0)
    m = Mlp().eval()
    x = torch.randn(2, 6)
    r = torch2onnx.export(m, x, tmp_path / "k.onnx", input_names=["x"], keep_initializers_as_inputs=True,
                          do_constant_folding=False)
    assert r.optimization is None and r.input_names == ["x"]
    g = onnx.load(r.path).graph
    inits = {i.name for i in g.initializer}
    assert len(inits) == 4 and inits <= {i.name for i in g.input} and g.input[0].name == "x"
    want = m(x).detach().numpy()
    np.testing.assert_allclose(ort.run(r.path, [x.numpy()])[0], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(torch2onnx.InferenceSession(r.path).run(None, {"x": x.numpy()})[0], want, rtol=1e-5,
                               atol=1e-6)


class FixedBatchFreeWidth(torch.nn.Module):
    """The batches of x and z, 2, are fixed by the model (reshaped to literal sizes); y's last axis,
    also of size 2, may change, and the model computes a size from it."""

    def forward(self, x, y, z):
        return x.reshape(2, 3) * z.reshape(2, 3), y.reshape(y.shape[0], y.shape[1] * y.shape[2]) + 1


def test_equal_sized_dynamic_axes_are_learned_apart_when_one_cannot_change(tmp_path):
    m = FixedBatchFreeWidth()
    p = tmp_path / "fixed_batch.onnx"
    # Labelled apart, as torch.onnx's list form does; every run that moves all axes of size 2, or
    # every other label, fails on a batch.
    with pytest.warns(UserWarning, match=r"size 2 \(axis 0\)"):
        torch2onnx.export(m, (torch.randn(2, 3), torch.randn(1, 4, 2), torch.randn(2, 3)), p,
                          input_names=["x", "y", "z"], dynamic_axes={"x": {0: "a"}, "z": {0: "b"}, "y": {2: "c"}})
    x, y, z = torch.randn(2, 3), torch.randn(1, 4, 5), torch.randn(2, 3)
    got = ort.run(p, [x.numpy(), y.numpy(), z.numpy()])
    for g, w in zip(got, m(x, y, z)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-6)
