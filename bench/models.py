"""Benchmark models and the PyTorch side of the benchmark.

    /usr/bin/python3 bench/models.py export OUT_DIR [--t2o TORCH2ONNX] [NAME...]
                       # NAME.pt, NAME.onnx (torch2onnx's with --t2o, else torch.onnx.export's), NAME.bB.npy
    /usr/bin/python3 bench/models.py list [extra]                # the default NAME@BATCH list (or the extra models)
    /usr/bin/python3 bench/models.py time MODEL.pt INPUT.npy THREADS ITERS [OUT.npy]
    /usr/bin/python3 bench/models.py export-time OUT_DIR NAME REPEATS  # torch.onnx.export, median of REPEATS

torchvision CNNs and ViT-B/16, a BERT-base-sized nn.TransformerEncoder, a GPT-style decoder and a
2-layer LSTM, all with random weights (nothing is downloaded). `export` prints how long
torch.onnx.export took per model, as JSON lines; `time` prints PyTorch's latency as one JSON line. `export-time` times torch.onnx.export in this
process (torch already imported), from the eager model and from the saved TorchScript file.
"""
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torchvision

class Gpt(torch.nn.Module):
    """A GPT-style decoder: token and position embeddings, pre-norm blocks with causal
    self-attention and a GELU MLP, a tied LM head."""

    def __init__(self, vocab=8192, d=512, heads=8, layers=6, ctx=1024):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(ctx, d)
        self.blocks = torch.nn.ModuleList(GptBlock(d, heads) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(pos)
        for b in self.blocks:
            x = b(x)
        return self.norm(x) @ self.tok.weight.t()


class GptBlock(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))


class Lstm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(512, 512, 2)

    def forward(self, input):
        return self.rnn(input)[0]


def vit_b_16():
    model = torchvision.models.vit_b_16(weights=None)
    with torch.no_grad():  # torchvision zeroes the head: random logits make outputs comparable
        model.heads.head.weight.normal_(0.0, 0.02)
    return model


def bert():
    layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, activation="gelu", batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
    # The encoder starts as 12 copies of one layer: give each its own weights, as a trained one has.
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    return model


# name: (model, example input for batch B, how to capture it, the input's name)
MODELS = {
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), lambda b: torch.randn(b, 3, 224, 224), "trace", "x"),
    "resnet50": (lambda: torchvision.models.resnet50(weights=None), lambda b: torch.randn(b, 3, 224, 224), "trace", "x"),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), lambda b: torch.randn(b, 3, 224, 224), "trace", "x"),
    # BERT-base-sized encoder on embeddings: 12 layers, hidden 768, 12 heads, seq 128
    "bert": (bert, lambda b: torch.randn(b, 128, 768), "trace", "src"),
    "vit_b_16": (vit_b_16, lambda b: torch.randn(b, 3, 224, 224), "trace", "x"),
    # causal decoder over 256 tokens
    "gpt": (Gpt, lambda b: torch.randint(0, 8192, (b, 256)), "script", "tokens"),
    # 2-layer LSTM, hidden 512, 100 steps (time first)
    "lstm": (Lstm, lambda b: torch.randn(100, b, 512), "script", "input"),
}


def _tv(name, **kw):
    return lambda: getattr(torchvision.models, name)(weights=None, **kw)


# Other torchvision classifiers, not benchmarked by default (`list extra`): squeeze-and-excitation
# with SiLU / HardSwish, 5x5 depthwise, channel concatenation, grouped convs, 7x7 depthwise with
# channels-last LayerNorm, windowed attention.
EXTRA = ["efficientnet_b0", "mobilenet_v3_large", "mnasnet1_0", "regnet_y_400mf", "squeezenet1_1",
         "shufflenet_v2_x1_0", "googlenet", "densenet121", "resnext50_32x4d", "inception_v3", "convnext_tiny",
         "swin_t"]
for _n in EXTRA:
    _kw = {"aux_logits": False, "init_weights": True} if _n in ("googlenet", "inception_v3") else {}
    _size = 299 if _n == "inception_v3" else 224
    MODELS[_n] = (_tv(_n, **_kw), lambda b, s=_size: torch.randn(b, 3, s, s), "trace", "x")
# Models benchmarked by default and at which batch sizes (BERT/ViT/GPT at 8 take seconds a run).
DEFAULT = ["resnet18", "resnet50", "mobilenet_v2", "bert", "vit_b_16", "gpt", "lstm"]
BATCHES = {"lstm": (1, 8), "bert": (1, 8), "resnet50": (1, 8)}


def batch_axis(name):
    return 1 if name == "lstm" else 0


def capture(name, batch=1):
    make, example, how, input_name = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    x = example(batch)
    with torch.no_grad():
        ts = torch.jit.trace(model, (x,)) if how == "trace" else torch.jit.script(model)
    return model, ts, x, input_name


def export(out, names, t2o=None):
    """NAME.pt, NAME.onnx and NAME.bB.npy inputs for each batch size. With t2o (the torch2onnx
    binary) the ONNX file is torch2onnx's conversion, batch axis dynamic; else torch.onnx.export's
    at opset 13 (static shapes, batch 1 only)."""
    os.makedirs(out, exist_ok=True)
    for name in names or DEFAULT:
        model, ts, x, input_name = capture(name)
        ts.save(os.path.join(out, name + ".pt"))
        for b in BATCHES.get(name, (1,)):
            torch.manual_seed(1)
            np.save(os.path.join(out, f"{name}.b{b}.npy"), MODELS[name][1](b).numpy())
        onnx_path = os.path.join(out, name + ".onnx")
        t0 = time.perf_counter()
        if t2o:
            dims = "x".join(str(d) for d in x.shape)
            dtype = {torch.float32: "f32", torch.int64: "i64"}[x.dtype]
            subprocess.run([t2o, "convert", os.path.join(out, name + ".pt"), "-o", onnx_path, "--quiet",
                            "--input", f"{input_name}:{dims}:{dtype}",
                            "--dynamic", f"{input_name}:{batch_axis(name)}=batch"], check=True)
            key = "t2o_convert_s"
        else:
            with torch.no_grad():
                torch.onnx.export(model, (x,), onnx_path, opset_version=13, input_names=[input_name])
            key = "torch_onnx_export_s"
        secs = time.perf_counter() - t0
        print(json.dumps({"model": name, key: round(secs, 3)}), flush=True)


def export_time(out, name, repeats):
    model, _, x, _ = capture(name)
    # Wall and CPU seconds (CPU time is the steadier measure on a shared machine).
    eager, script, eager_cpu, script_cpu = [], [], [], []
    for _ in range(int(repeats)):
        t0, c0 = time.perf_counter(), time.process_time()
        torch.onnx.export(model, (x,), os.path.join(out, name + ".export.onnx"), opset_version=17)
        eager.append(time.perf_counter() - t0)
        eager_cpu.append(time.process_time() - c0)
        t0, c0 = time.perf_counter(), time.process_time()
        ts = torch.jit.load(os.path.join(out, name + ".pt")).eval()
        torch.onnx.export(ts, (x,), os.path.join(out, name + ".export.onnx"), opset_version=17)
        script.append(time.perf_counter() - t0)
        script_cpu.append(time.process_time() - c0)
    med = statistics.median
    print(json.dumps({"model": name, "export_eager_s": med(eager), "export_eager_cpu_s": med(eager_cpu),
                      "export_from_pt_s": med(script), "export_from_pt_cpu_s": med(script_cpu)}), flush=True)


def time_model(pt, inp, threads, iters, out=None):
    torch.set_num_threads(int(threads))
    m = torch.jit.load(pt).eval()
    x = torch.from_numpy(np.load(inp))
    with torch.no_grad():
        for _ in range(3):
            y = m(x)
        ms = []
        for _ in range(int(iters)):
            t0 = time.perf_counter()
            y = m(x)
            ms.append((time.perf_counter() - t0) * 1e3)
    if out:
        np.save(out, y.numpy())
    print(json.dumps({"median_ms": statistics.median(ms), "min_ms": min(ms)}))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "export":
        args = sys.argv[3:]
        t2o = None
        if args[:1] == ["--t2o"]:
            t2o, args = args[1], args[2:]
        export(sys.argv[2], args, t2o)
    elif sys.argv[1] == "list":
        names = EXTRA if sys.argv[2:] == ["extra"] else DEFAULT
        print(" ".join(f"{n}@{b}" for n in names for b in BATCHES.get(n, (1,))))
    elif sys.argv[1] == "export-time":
        export_time(*sys.argv[2:])
    elif sys.argv[1] == "time":
        time_model(*sys.argv[2:])
    else:
        sys.exit(__doc__)
