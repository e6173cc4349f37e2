"""Fixtures for the pitfall tests (docs/pitfalls.md): one builder per item.

Each builder writes into a folder: model.pt (and other files), run_K/input_J.npy with the PyTorch
reference run_K/output_J.npy (inputs and outputs flattened depth-first, in graph order), and
case.json: {"inputs": [names], "convert": [extra convert args], "opsets": [...], "tol": [rtol, atol]}.
"""
import json
import os
from typing import List, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def flat(x, out):
    if isinstance(x, (tuple, list)):
        for e in x:
            flat(e, out)
    else:
        out.append(x)
    return out


def write_runs(d, model_fn, input_sets):
    for k, inputs in enumerate(input_sets):
        rd = os.path.join(d, f"run_{k}")
        os.makedirs(rd, exist_ok=True)
        with torch.no_grad():
            outs = flat(model_fn(*inputs), [])
        for j, t in enumerate(flat(list(inputs), [])):
            np.save(os.path.join(rd, f"input_{j}.npy"), t.numpy())
        for j, t in enumerate(outs):
            np.save(os.path.join(rd, f"output_{j}.npy"), t.detach().numpy())


def write_case(d, inputs, convert, opsets=(9, 13, 17), tol=(1e-4, 1e-5), **extra):
    case = dict(inputs=inputs, convert=convert, opsets=list(opsets), tol=list(tol), **extra)
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(case, f, indent=1)


def dims(t):
    return "x".join(str(s) for s in t.shape)


# --- 6. weights without the class -------------------------------------------------------------
class WeightsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        return self.fc(x.mean(dim=(2, 3)))


def build_weights(d):
    torch.manual_seed(0)
    trained = WeightsNet()
    trained.bn.running_mean.uniform_(-0.5, 0.5)
    trained.bn.running_var.uniform_(0.5, 1.5)
    trained.eval()
    torch.save(trained.state_dict(), os.path.join(d, "weights.pth"))
    torch.save(trained, os.path.join(d, "model_pickled.pth"))
    torch.manual_seed(123)
    torch.jit.script(WeightsNet().eval()).save(os.path.join(d, "arch.pt"))  # untrained architecture
    bad = dict(trained.state_dict())
    del bad["fc.bias"]
    bad["head.weight"] = torch.zeros(2)
    bad["conv.weight"] = torch.zeros(8, 3, 5, 5)
    torch.save(bad, os.path.join(d, "bad_weights.pth"))
    x = torch.randn(2, 3, 16, 16)
    write_runs(d, trained, [(x,)])
    write_case(d, ["x"], ["--input", f"x:{dims(x)}", "--weights", "weights.pth"], model="arch.pt")


# --- 8. opsets -----------------------------------------------------------------------------------
class OpsetNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=-1)


class LayerNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(16)

    def forward(self, x):
        return self.ln(x) * 2.0


def build_opset(d):
    torch.manual_seed(0)
    m = OpsetNet().eval()
    torch.jit.script(m).save(os.path.join(d, "model.pt"))
    torch.jit.script(LayerNormNet().eval()).save(os.path.join(d, "layernorm.pt"))
    x = torch.randn(2, 3, 16, 16)
    write_runs(d, m, [(x,)])
    write_case(d, ["x"], ["--input", f"x:{dims(x)}"], opsets=[9, 13], versions=[11, 13, 15, 17])


# --- 5. custom operators -------------------------------------------------------------------------
class CbrNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 3, 3, 3) * 0.3)
        self.b = nn.Parameter(torch.randn(8) * 0.1)
        self.scale = nn.Parameter(torch.rand(8) + 0.5)
        self.shift = nn.Parameter(torch.randn(8) * 0.1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.ops.mylib.cbr(x, self.w, self.b, self.scale, self.shift, 1)
        return self.fc(y.mean(dim=(2, 3)))


CBR_SCHEMA = ("mylib::cbr(Tensor x, Tensor w, Tensor b, Tensor scale, Tensor shift, int padding=1) -> Tensor"
              "=mylib::Cbr")


def build_custom_op(d, torch_lib):
    torch.ops.load_library(torch_lib)
    torch.manual_seed(0)
    m = CbrNet().eval()
    torch.jit.script(m).save(os.path.join(d, "model.pt"))
    x = torch.randn(2, 3, 12, 12)
    write_runs(d, m, [(x,)])
    write_case(d, ["x"], ["--input", f"x:{dims(x)}", "--custom-op", CBR_SCHEMA], ort=False, plugin=True)


# --- 3. spectral norm ----------------------------------------------------------------------------
class SNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.utils.spectral_norm(nn.Conv2d(3, 8, 3, padding=1))
        self.fc = nn.utils.spectral_norm(nn.Linear(8, 4))

    def forward(self, x):
        return self.fc(F.leaky_relu(self.conv(x), 0.2).mean(dim=(2, 3)))


def build_spectral(d):
    torch.manual_seed(0)
    m = SNNet()
    m.train()
    for _ in range(3):  # power iterations move u and v, as training does
        m(torch.randn(4, 3, 8, 8))
    m.eval()
    x = torch.randn(2, 3, 8, 8)
    # Hooks are not scriptable; tracing records the eval-mode hook on the parameters.
    torch.jit.trace(m, (x,), check_trace=False).save(os.path.join(d, "model.pt"))
    torch.save(m.state_dict(), os.path.join(d, "state_dict.pth"))
    write_runs(d, m, [(x,)])
    write_case(d, ["x"], ["--input", f"x:{dims(x)}"], layers=2)


# --- 4. saved in train() mode ---------------------------------------------------------------------
class TrainNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x))).mean(dim=(2, 3))
        return self.fc(self.drop(x))


class TracedTrainNet(nn.Module):
    """Traced in train(): dropout and batch statistics are baked into the graph as constants, and
    InstanceNorm's running stats (updated in place) stay module state after freezing."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.inorm = nn.InstanceNorm2d(8, affine=True, track_running_stats=True)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        x = F.relu(self.inorm(self.bn(self.conv(x)))).mean(dim=(2, 3))
        return self.fc(F.dropout(self.drop(x), 0.2, self.training))


def build_train_mode(d):
    torch.manual_seed(0)
    m = TrainNet()
    m.bn.running_mean.uniform_(-0.5, 0.5)
    m.bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 10, 10)
    sd = os.path.join(d, "scripted")
    os.makedirs(sd)
    s = torch.jit.script(m)
    s.train()
    s.save(os.path.join(sd, "model.pt"))
    m.eval()
    write_runs(sd, m, [(x,)])
    write_case(sd, ["x"], ["--input", f"x:{dims(x)}"], warn=["training mode", "bn", "drop"])
    # Traced while in train(): saved as is, and switched to eval() after tracing (the graph keeps the
    # training behaviour although the modules say eval).
    for name, eval_after in (("traced", False), ("traced_then_eval", True)):
        torch.manual_seed(1)
        t = TracedTrainNet()
        t.bn.running_mean.uniform_(-0.5, 0.5)
        t.bn.running_var.uniform_(0.5, 1.5)
        t.inorm.running_mean.uniform_(-0.5, 0.5)
        t.inorm.running_var.uniform_(0.5, 1.5)
        t.train()
        traced = torch.jit.trace(t, (x,), check_trace=False)  # updates the running stats once
        if eval_after:
            traced.eval()
        td = os.path.join(d, name)
        os.makedirs(td)
        traced.save(os.path.join(td, "model.pt"))
        t.eval()
        write_runs(td, t, [(x,)])
        write_case(td, ["x"], ["--input", f"x:{dims(x)}"], warn=["inference semantics", "bn", "inorm", "drop"])


# --- 7. saved on a GPU ----------------------------------------------------------------------------
class CudaNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        dev = torch.device("cuda")
        bias = torch.ones(6, device=dev) * 0.5
        y = self.fc(x.to(dev)) + bias
        return y + torch.arange(6, device=torch.device("cuda:0")).float()


class CpuTwin(nn.Module):
    def __init__(self, src):
        super().__init__()
        self.fc = src.fc

    def forward(self, x):
        return self.fc(x) + torch.ones(6) * 0.5 + torch.arange(6).float()


def build_cuda(d):
    torch.manual_seed(0)
    m = CudaNet().eval()
    torch.jit.script(m).save(os.path.join(d, "model.pt"))  # scripting never runs the code
    x = torch.randn(3, 6)
    write_runs(d, CpuTwin(m).eval(), [(x,)])
    write_case(d, ["x"], ["--input", f"x:{dims(x)}"])


# --- 2. mv / dot / outer --------------------------------------------------------------------------
class MvDotOuter(nn.Module):
    def forward(self, m, v, w):
        return torch.mv(m, v), torch.dot(v, w), torch.outer(v, w), m.mv(w) * torch.dot(w, v)


def build_mv_dot_outer(d):
    torch.manual_seed(0)
    mod = MvDotOuter()
    torch.jit.script(mod).save(os.path.join(d, "model.pt"))
    m, v, w = torch.randn(5, 4), torch.randn(4), torch.randn(4)
    write_runs(d, mod, [(m, v, w)])
    write_case(d, ["m", "v", "w"], ["--input", "m:5x4", "--input", "v:4", "--input", "w:4"],
               opsets=list(range(9, 18)))


# --- 9. resize from computed sizes ------------------------------------------------------------------
class Upsample2x(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return F.interpolate(y, size=(x.shape[2] * 2, x.shape[3] * 2), mode="nearest")


def build_resize(d):
    torch.manual_seed(0)
    m = Upsample2x().eval()
    torch.jit.script(m).save(os.path.join(d, "model.pt"))
    xs = [(torch.randn(1, 3, 8, 10),), (torch.randn(1, 3, 13, 7),)]
    write_runs(d, m, xs)
    write_case(d, ["x"], ["--input", "x:1x3x8x10", "--dynamic", "x:2=h,3=w"], opsets=[11, 13, 17])


# --- 10. dynamic batch and sequence -------------------------------------------------------------------
class DynCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.relu(self.c2(F.relu(self.c1(x))))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.lstm = nn.LSTM(16, 24, batch_first=True)
        self.out = nn.Linear(24, 7)

    def forward(self, tokens):
        y, _ = self.lstm(self.emb(tokens))
        return self.out(y)


def build_dynamic_cnn(d):
    torch.manual_seed(0)
    m = DynCNN().eval()
    torch.jit.script(m).save(os.path.join(d, "model.pt"))
    write_runs(d, m, [(torch.randn(b, 3, 16, 16),) for b in (1, 3, 8)])
    write_case(d, ["x"], ["--input", "x:2x3x16x16", "--dynamic", "x:0=batch"], opsets=[13, 17])


def build_dynamic_nlp(d):
    torch.manual_seed(0)
    m = Tagger().eval()
    torch.jit.script(m).save(os.path.join(d, "model.pt"))
    runs = [(torch.randint(0, 50, (b, s)),) for b, s in ((1, 5), (3, 12), (6, 2))]
    write_runs(d, m, runs)
    write_case(d, ["tokens"], ["--input", "tokens:2x7:i64", "--dynamic", "tokens:0=batch,1=seq"], opsets=[13, 17],
               tol=[1e-4, 1e-5])


# --- 1. LSTMCell / GRUCell ------------------------------------------------------------------------
class StackedLSTM(nn.Module):
    """The classic (OpenNMT) input-feeding decoder: LSTMCell layers with dropout between them."""

    def __init__(self, num_layers: int = 2, input_size: int = 580, rnn_size: int = 500, dropout: float = 0.3):
        super().__init__()
        self.num_layers = num_layers
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(nn.LSTMCell(input_size, rnn_size))
            input_size = rnn_size

    def forward(self, input_feed, hidden: Tuple[Tensor, Tensor]):
        h_0, c_0 = hidden
        h_1: List[Tensor] = []
        c_1: List[Tensor] = []
        for i, layer in enumerate(self.layers):
            h_1_i, c_1_i = layer(input_feed, (h_0[i], c_0[i]))
            input_feed = h_1_i
            if i + 1 != self.num_layers:
                input_feed = self.dropout(input_feed)
            h_1 += [h_1_i]
            c_1 += [c_1_i]
        return input_feed, (torch.stack(h_1), torch.stack(c_1))


class FusedCells(nn.Module):
    """What a GPU trace of LSTMCell/GRUCell records: the fused CUDA cell ops."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTMCell(12, 10)
        self.gru = nn.GRUCell(10, 10)

    def forward(self, x, h, c):
        ig = torch.mm(x, self.lstm.weight_ih.t())
        hg = torch.mm(h, self.lstm.weight_hh.t())
        hy, cy, _ = torch.ops.aten._thnn_fused_lstm_cell(ig, hg, c, self.lstm.bias_ih, self.lstm.bias_hh)
        gi = torch.mm(hy, self.gru.weight_ih.t())
        gh = torch.mm(h, self.gru.weight_hh.t())
        hg2, _ = torch.ops.aten._thnn_fused_gru_cell(gi, gh, h, self.gru.bias_ih, self.gru.bias_hh)
        return hg2, cy


def fused_reference(m, x, h, c):
    """The cells' defining equations (PyTorch has no CPU kernel for the fused ops)."""
    lw = m.lstm
    gates = x @ lw.weight_ih.t() + lw.bias_ih + h @ lw.weight_hh.t() + lw.bias_hh
    i, f, g, o = gates.chunk(4, 1)
    cy = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    hy = torch.sigmoid(o) * torch.tanh(cy)
    gw = m.gru
    gi = (hy @ gw.weight_ih.t() + gw.bias_ih).chunk(3, 1)
    gh = (h @ gw.weight_hh.t() + gw.bias_hh).chunk(3, 1)
    r, z = torch.sigmoid(gi[0] + gh[0]), torch.sigmoid(gi[1] + gh[1])
    n = torch.tanh(gi[2] + r * gh[2])
    return (1 - z) * n + z * h, cy


class Cells(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRUCell(6, 8)
        self.rt = nn.RNNCell(6, 8, nonlinearity="tanh")
        self.rr = nn.RNNCell(6, 8, nonlinearity="relu")

    def forward(self, x, h):
        return self.gru(x, h), self.rt(x, h), self.rr(x, h)


def build_cells(d):
    torch.manual_seed(0)
    m = StackedLSTM().eval()
    inputs = (torch.randn(10, 580), (torch.randn(2, 10, 500), torch.randn(2, 10, 500)))
    sd = os.path.join(d, "stacked")
    os.makedirs(sd, exist_ok=True)
    torch.jit.script(m).save(os.path.join(sd, "model.pt"))
    write_runs(sd, m, [inputs])
    write_case(sd, ["input_feed", "hidden.0", "hidden.1"],
               ["--input", "input_feed:10x580", "--input", "hidden.0:2x10x500", "--input", "hidden.1:2x10x500"],
               tol=[1e-3, 1e-4])
    td = os.path.join(d, "traced")
    os.makedirs(td, exist_ok=True)
    torch.jit.trace(m, inputs, check_trace=False).save(os.path.join(td, "model.pt"))
    write_runs(td, m, [inputs])
    write_case(td, ["input_feed", "hidden.0", "hidden.1"],
               ["--input", "input_feed:10x580", "--input", "hidden.0:2x10x500", "--input", "hidden.1:2x10x500"],
               tol=[1e-3, 1e-4])
    fd = os.path.join(d, "fused")
    os.makedirs(fd, exist_ok=True)
    f = FusedCells().eval()
    torch.jit.script(f).save(os.path.join(fd, "model.pt"))
    x, h, c = torch.randn(3, 12), torch.randn(3, 10), torch.randn(3, 10)
    write_runs(fd, lambda *a: fused_reference(f, *a), [(x, h, c)])
    write_case(fd, ["x", "h", "c"], ["--input", "x:3x12", "--input", "h:3x10", "--input", "c:3x10"])
    cd = os.path.join(d, "cells")
    os.makedirs(cd, exist_ok=True)
    cm = Cells().eval()
    torch.jit.script(cm).save(os.path.join(cd, "model.pt"))
    write_runs(cd, cm, [(torch.randn(4, 6), torch.randn(4, 8))])
    write_case(cd, ["x", "h"], ["--input", "x:4x6", "--input", "h:4x8"])


BUILDERS = {
    "weights": build_weights, "opset": build_opset, "custom_op": build_custom_op, "spectral": build_spectral,
    "train_mode": build_train_mode, "cuda": build_cuda, "mv_dot_outer": build_mv_dot_outer, "resize": build_resize,
    "dynamic_cnn": build_dynamic_cnn, "dynamic_nlp": build_dynamic_nlp, "cells": build_cells,
}
