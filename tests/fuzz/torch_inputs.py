"""TorchScript and torch.save files for the hardening tests and the converter fuzz corpus.

  torch_inputs.py fixtures DIR   good.pt, and broken variants of it (truncated weight record,
                                 10,000 nested parentheses), state.pth and a truncated copy
  torch_inputs.py corpus DIR     small TorchScript models packed in the fuzz harness's record
                                 format (see fuzz_torch.cpp): u16 name length, name, u32 data
                                 length, data, repeated; little endian
"""
import io
import os
import struct
import sys
import zipfile

import torch


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x)) + 1


class Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(3)

    def forward(self, x):
        y = self.bn(self.conv(x))
        return torch.cat([y, y.flip(1)], 1).mean(dim=[2, 3])


class Control(torch.nn.Module):
    def forward(self, x, n: int = 3):
        y = x
        for i in range(n):
            if bool(y.sum() > 0):
                y = y * 0.5
            else:
                y = y - 1
        return y.view(-1)


def records(path):
    """(name, bytes) of a zip archive, the archive's top folder stripped."""
    with zipfile.ZipFile(path) as z:
        out = []
        for info in z.infolist():
            name = info.filename.split("/", 1)[1] if "/" in info.filename else info.filename
            out.append((name, z.read(info)))
        return out


def rewrite(src, dst, change):
    """Copies a zip archive, passing each (name, bytes) through change (None drops it)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            short = info.filename.split("/", 1)[1] if "/" in info.filename else info.filename
            data = change(short, zin.read(info))
            if data is not None:
                zout.writestr(info.filename, data)


def fixtures(d):
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    m = torch.jit.script(Small().eval())
    good = os.path.join(d, "good.pt")
    m.save(good)
    weights = [n for n, _ in records(good) if n.startswith("data/")]
    # The largest weight record loses half its bytes: shorter than its shape.
    big = max(weights, key=lambda n: len(dict(records(good))[n]))
    rewrite(good, os.path.join(d, "truncated.pt"), lambda n, b: b[: len(b) // 2] if n == big else b)
    deep = "(" * 10000 + "x" + ")" * 10000

    def nest(n, b):
        if n.startswith("code/") and n.endswith(".py"):
            s = b.decode()
            s = s.replace("torch.relu(", "torch.relu(" + deep + " + ", 1)
            return s.encode()
        return b

    rewrite(good, os.path.join(d, "nested.pt"), nest)
    sd = os.path.join(d, "state.pth")
    torch.save(Small().state_dict(), sd)
    sw = [n for n, _ in records(sd) if n.startswith("data/")]
    big = max(sw, key=lambda n: len(dict(records(sd))[n]))
    rewrite(sd, os.path.join(d, "state_truncated.pth"), lambda n, b: b[: len(b) - 6] if n == big else b)


def pack(path, inputs):
    out = io.BytesIO()
    spec = inputs.encode()
    out.write(struct.pack("<H", 6) + b"inputs" + struct.pack("<I", len(spec)) + spec)
    for name, data in records(path):
        if name == "version" or name.endswith(".debug_pkl"):
            continue  # the harness writes its own version; debug info only slows the loader
        nb = name.encode()
        out.write(struct.pack("<H", len(nb)) + nb + struct.pack("<I", len(data)) + data)
    return out.getvalue()


def corpus(d):
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    models = {"small": (Small(), "x:2x4"), "conv": (Conv(), "x:1x2x6x6"), "control": (Control(), "x:2x3")}
    for name, (mod, inputs) in models.items():
        path = os.path.join(d, name + ".pt")
        torch.jit.script(mod.eval()).save(path)
        with open(os.path.join(d, name + ".rec"), "wb") as f:
            f.write(pack(path, inputs))
        os.remove(path)
    traced = torch.jit.trace(Small().eval(), torch.randn(2, 4))
    path = os.path.join(d, "traced.pt")
    traced.save(path)
    with open(os.path.join(d, "traced.rec"), "wb") as f:
        f.write(pack(path, "x:2x4"))
    os.remove(path)


if __name__ == "__main__":
    {"fixtures": fixtures, "corpus": corpus}[sys.argv[1]](sys.argv[2])
