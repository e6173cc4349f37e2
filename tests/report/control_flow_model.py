"""A scripted model with an If on data and a Loop (for the report's drawings of bodies).

usage: control_flow_model.py OUT.pt
"""
import sys

import torch


class ControlFlow(torch.nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            y = torch.relu(x) * 2
        else:
            y = torch.sigmoid(x) - 1
        for _ in range(int(x.shape[0])):
            y = y + 1
        return y


if __name__ == "__main__":
    torch.jit.script(ControlFlow().eval()).save(sys.argv[1])
