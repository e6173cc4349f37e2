"""Node counts of torch2onnx `convert` against torch.onnx.export (torch 1.13), same models, same opset,
same run.

    /usr/bin/python3 bench/node_counts.py TORCH2ONNX [--opset 17] [--work DIR] [--no-optimize-too] [NAME...]

Models: the 21 torchvision classifiers of tests/e2e/torchvision_e2e.py (random weights), a BERT-style
encoder (embedding + nn.TransformerEncoder + pooled classifier) and an LSTM tagger. Each is scripted
(traced where scripting fails) for torch2onnx and exported from the eager module with
torch.onnx.export, both with a dynamic batch axis. Prints a Markdown table: nodes of ours (optimized,
and unoptimized with --no-optimize-too), nodes of torch.onnx, BatchNormalization nodes left behind a
Conv/ConvTranspose/Gemm in ours, and whether ours has <= torch.onnx's count. Exits 1 if any model is
over or keeps such a BatchNormalization.
"""
import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import onnx
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import torchvision_e2e as tv  # noqa: E402  (the model list and the weight randomisation)

warnings.filterwarnings("ignore")


class BertStyle(nn.Module):
    """Token + position embeddings, LayerNorm, a post-norm TransformerEncoder, first-token classifier."""

    def __init__(self, vocab=1000, d=256, heads=4, layers=4, ff=1024, max_len=128, classes=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.norm = nn.LayerNorm(d)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.1, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        # TransformerEncoder deep-copies one layer: give each its own weights, as a trained model has.
        for enc in self.encoder.layers:
            for mod in enc.modules():
                if mod is not enc and hasattr(mod, "reset_parameters"):
                    mod.reset_parameters()
                elif hasattr(mod, "_reset_parameters"):
                    mod._reset_parameters()
        self.pool = nn.Linear(d, d)
        self.head = nn.Linear(d, classes)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device).unsqueeze(0)
        h = self.norm(self.tok(tokens) + self.pos(pos))
        h = self.encoder(h)
        return self.head(torch.tanh(self.pool(h[:, 0])))


class LSTMTagger(nn.Module):
    def __init__(self, vocab=1000, d=128, hidden=256, tags=17):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, tokens):
        y, _ = self.lstm(self.emb(tokens))
        return torch.log_softmax(self.out(y), dim=-1)


def models():
    r = [(name, make, (torch.randn(1, 3, size, size),), "x", [0]) for name, make, size in tv.MODELS]
    r.append(("bert_encoder", BertStyle, (torch.randint(0, 1000, (1, 32)),), "tokens", [0, 1]))
    r.append(("lstm_tagger", LSTMTagger, (torch.randint(0, 1000, (1, 20)),), "tokens", [0, 1]))
    return r


def counts(path):
    m = onnx.load(path, load_external_data=False)
    producers = {o: n for n in m.graph.node for o in n.output}
    bn_behind = 0
    for n in m.graph.node:
        if n.op_type == "BatchNormalization":
            p = producers.get(n.input[0])
            if p is not None and p.op_type in ("Conv", "ConvTranspose", "Gemm"):
                bn_behind += 1
    ops = collections.Counter(n.op_type for n in m.graph.node)
    return len(m.graph.node), bn_behind, ops


def export_torch(model, args, path, opset, input_name, axes):
    names = {0: "batch", 1: "seq"}
    torch.onnx.export(model, args, path, opset_version=opset, input_names=[input_name],
                      dynamic_axes={input_name: {a: names[a] for a in axes}})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--work")
    ap.add_argument("--no-optimize-too", action="store_true")
    ap.add_argument("--ops", action="store_true", help="print the op histograms where ours is larger")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="t2o_nodecounts_")
    os.makedirs(work, exist_ok=True)
    print(f"| model | ours | {'ours unoptimized | ' if a.no_optimize_too else ''}torch.onnx 1.13 | BN behind Conv/Gemm (ours) | ours <= torch.onnx |")
    print(f"|---|---|{'---|' if a.no_optimize_too else ''}---|---|---|")
    bad = []
    try:
        for name, make, args, input_name, axes in models():
            if a.names and not any(name.startswith(p) for p in a.names):
                continue
            torch.manual_seed(0)
            with torch.no_grad():
                model = tv._randomise(make()).eval()
                try:
                    ts = torch.jit.script(model)
                except Exception:  # noqa: BLE001
                    ts = torch.jit.trace(model, args, check_trace=False)
                pt = os.path.join(work, name + ".pt")
                ts.save(pt)
            # With grad enabled, as users export: under no_grad nn.MultiheadAttention takes its fused
            # fast path (aten::_native_multi_head_attention), which torch.onnx 1.13 cannot export.
            theirs = os.path.join(work, name + ".torch.onnx")
            export_error = None
            try:
                export_torch(model, args, theirs, a.opset, input_name, axes)
            except Exception as e:  # noqa: BLE001 - report and go on
                export_error = str(e).splitlines()[0][:100]
            x = args[0]
            dtype = "i64" if x.dtype == torch.int64 else "f32"
            spec = f"{input_name}:{'x'.join(map(str, x.shape))}:{dtype}"
            dyn = f"{input_name}:" + ",".join(f"{ax}={'batch' if ax == 0 else 'seq'}" for ax in axes)
            ours = os.path.join(work, name + ".t2o.onnx")
            cmd = [a.cli, "convert", pt, "-o", ours, "--opset", str(a.opset), "--input", spec, "--dynamic", dyn, "--quiet"]
            subprocess.run(cmd, check=True)
            n_ours, bn, ops_ours = counts(ours)
            extra = ""
            if a.no_optimize_too:
                raw = os.path.join(work, name + ".t2o_raw.onnx")
                subprocess.run(cmd[:4] + [raw] + cmd[5:] + ["--no-optimize"], check=True)
                extra = f"{counts(raw)[0]} | "
            if export_error:
                print(f"| {name} | {n_ours} | {extra}(torch.onnx.export failed: {export_error}) | {bn} | - |", flush=True)
                if bn:
                    bad.append(name)
                continue
            n_theirs, _, ops_theirs = counts(theirs)
            ok = n_ours <= n_theirs and bn == 0
            if not ok:
                bad.append(name)
            print(f"| {name} | {n_ours} | {extra}{n_theirs} | {bn} | {'yes' if n_ours <= n_theirs else 'NO'} |", flush=True)
            if a.ops and n_ours > n_theirs:
                print("  ours:", dict(ops_ours), "\n  torch.onnx:", dict(ops_theirs), flush=True)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    if bad:
        print("over torch.onnx or keeping BN:", " ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
