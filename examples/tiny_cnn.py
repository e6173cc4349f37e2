"""Builds the bundled example: a small image classifier saved as TorchScript (tiny_cnn.pt),
plus sample input (input.npy) and PyTorch's output for it (expected.npy).

    /usr/bin/python3 examples/tiny_cnn.py OUT_DIR

Random weights, fixed seed: nothing is downloaded.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyCNN(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(32, classes)

    def forward(self, image):
        x = F.relu(self.bn1(self.conv1(image)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return F.softmax(self.fc(self.drop(x)), dim=1)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = TinyCNN().eval()
    # Give batch norm non-trivial statistics so a wrong conversion would show.
    with torch.no_grad():
        for bn in (model.bn1, model.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
    image = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        expected = model(image)
    # Saved in train() mode on purpose, a common slip: torch2onnx warns and exports inference.
    scripted = torch.jit.script(model.train())
    scripted.save(os.path.join(out, "tiny_cnn.pt"))
    np.save(os.path.join(out, "input.npy"), image.numpy())
    np.save(os.path.join(out, "expected.npy"), expected.numpy())
    print(f"wrote {out}/tiny_cnn.pt, input.npy, expected.npy")


if __name__ == "__main__":
    main()
