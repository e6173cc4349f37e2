"""Builds the fixtures of the verify tests: usage verify_models.py OUT_DIR

OUT_DIR/NAME/model.pt for cnn, embed and nan (scripted) and nested (traced, ops inside torch's own
modules), plus OUT_DIR/NAME/lines.txt mapping the tags of `# @tag` comments below to
"verify_models.py:LINE", the source lines the converter records.
"""
import os
import re
import sys

import torch
from torch import nn


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = self.conv2(x)
        x = torch.relu(x)  # @relu
        x = self.conv3(x)
        x = x.permute(0, 2, 3, 1)  # @permute
        x = self.fc(x)
        return x.reshape(x.shape[0], -1)


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 8)  # few rows: indices drawn without a bound would overflow
        self.proj = nn.Linear(8, 3)

    def forward(self, tokens):
        return self.proj(self.emb(tokens)).sum(dim=1)


class Nan(nn.Module):
    def forward(self, x):
        a = torch.sqrt(x)  # NaN wherever x < 0, in PyTorch and in ONNX alike
        b = torch.sqrt(torch.abs(x))  # @abs
        return a, b


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())

    def forward(self, x):
        return x + self.body(x)  # @block


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.blocks = nn.Sequential(Block(8), Block(8))

    def forward(self, x):
        return self.blocks(self.stem(x)).mean(dim=(2, 3))


def tag_lines():
    here = os.path.abspath(__file__)
    tags = {}
    with open(here) as f:
        for i, line in enumerate(f, 1):
            m = re.search(r"# @(\w+)$", line.rstrip())
            if m:
                tags[m.group(1)] = f"{os.path.basename(here)}:{i}"
    return tags


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    tags = tag_lines()
    for name, m in (("cnn", Cnn()), ("embed", Embed()), ("nan", Nan())):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        torch.jit.script(m.eval()).save(os.path.join(d, "model.pt"))
    d = os.path.join(out, "nested")
    os.makedirs(d, exist_ok=True)
    torch.jit.trace(Nested().eval(), torch.randn(1, 3, 8, 8)).save(os.path.join(d, "model.pt"))
    for name in ("cnn", "embed", "nan", "nested"):
        with open(os.path.join(out, name, "lines.txt"), "w") as f:
            f.write("".join(f"{k} {v}\n" for k, v in sorted(tags.items())))


if __name__ == "__main__":
    main()
