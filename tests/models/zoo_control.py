"""Control flow: data-dependent If, loops with carried values, unrolled list building."""
import torch
import torch.nn as nn


class DataIf(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = x * 2
        else:
            y = x - 1
        return y + 1


class CarriedLoop(nn.Module):
    def forward(self, x, n: int = 3):
        h = x
        for i in range(n):
            h = torch.tanh(h * 0.5 + i)
        k = 0
        while k < 4:
            h = h + 1
            k += 1
        return h


class ListBuild(nn.Module):
    def forward(self, x):
        outs = []
        for i in range(3):
            outs.append(x[:, i] * i)
        return torch.stack(outs, 1)


class DynLoop(nn.Module):
    def forward(self, x):
        h = torch.zeros_like(x[0])
        for i in range(x.size(0)):
            h = h + x[i]
        return h


def fixtures():
    r = torch.randn
    return {
        "ctl_if": lambda: dict(model=DataIf(), inputs=[r(3, 4)]),
        "ctl_loop": lambda: dict(model=CarriedLoop(), inputs=[r(3, 4)]),
        "ctl_listbuild": lambda: dict(model=ListBuild(), inputs=[r(2, 4)]),
        "ctl_dynloop": lambda: dict(model=DynLoop(), inputs=[r(5, 3)], dynamic=["x:0=steps"]),
    }
