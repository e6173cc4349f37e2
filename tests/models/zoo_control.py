"""Control flow: data-dependent If, loops with carried values, unrolled list building."""
from typing import List, Optional

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


class LoopAppend(nn.Module):
    # Data-dependent trip count: the list becomes an ONNX sequence carried through the Loop.
    def forward(self, x):
        outs: List[torch.Tensor] = []
        h = x
        while bool(h.abs().sum() < 60.0):
            outs.append(h)
            h = h * 2 + 0.5
        return torch.cat(outs, 0), torch.stack(outs, 1).sum(1), outs[-1], len(outs)


class DynListLoop(nn.Module):
    def forward(self, x):
        rows: List[torch.Tensor] = []
        acc: List[torch.Tensor] = [x[0]]
        for i in range(x.size(0)):
            if bool(x[i].sum() > 0):
                rows.append(x[i] * 2)
            else:
                rows.append(x[i] - 1)
            acc = acc + [x[i] + i]
        a, b = rows[0], rows[len(rows) // 2]
        return torch.stack(rows, 0), torch.cat(acc, 0), a * b, rows[-1]


class IfList(nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            ys = [x, x * 2]
        else:
            ys = [x - 1, x + 1, x * 3]
        if bool(x.mean() < 10.0):
            zs = [x + 1, x * x]
        else:
            zs = [x, x]
        p, q = zs
        extra: List[torch.Tensor] = [x]
        if bool(x.max() > 0):
            extra.append(x.abs())
        both: List[torch.Tensor] = [x]
        if bool(x.min() < 0):
            both.append(x + 1)
        else:
            both.append(x - 1)
        return torch.cat(ys, 0), p - q, torch.stack(extra, 0).sum(0), torch.cat(both, 1)


class LoopListPop(nn.Module):
    def forward(self, x):
        outs: List[torch.Tensor] = [x, x + 1]
        h = x
        while bool(h.sum() < 30.0):
            outs.append(h)
            outs.pop(0)
            h = h + 1
        return torch.cat(outs, 0)


class ListOps(nn.Module):
    """Python list operations on lists of tensors: pop, del, insert, an index computed from the data."""
    def forward(self, x):
        parts = [x, x * 2, x * 3, x + 1]
        last = parts.pop()
        first = parts.pop(0)
        del parts[0]
        parts.insert(0, last)
        parts.insert(-1, first)
        k = int(x.size(0)) % 3
        return torch.stack(parts), parts[k] * 10


class OptionalState(nn.Module):
    """Streaming-style state: None until the first step sets it (Emformer, RNN-T decoders)."""
    def forward(self, x, mem: Optional[torch.Tensor] = None):
        state: Optional[torch.Tensor] = mem
        outs: List[torch.Tensor] = []
        for i in range(x.size(0)):
            if state is None:
                state = x[i]
            else:
                state = state * 0.5 + x[i]
            outs.append(state)
        last: Optional[torch.Tensor] = None
        if bool(x.sum() > 0):
            last = x[0]
        y = torch.stack(outs)
        if last is not None:
            y = y + last
        return y


class LoopInPlace(nn.Module):
    """A loop over a dynamic count that writes slices of a tensor in place (ConvLSTM-style state
    set-up): the written tensor rides the loop as a tensor, no list is built."""
    def forward(self, x):
        state = torch.zeros(2, x.size(1), x.size(2))
        for i in range(x.size(0)):
            state[1] += x[i]
            state[0] = state[0] * 0.5 + x[i]
        return state


class EarlyReturn(nn.Module):
    """A return inside nested ifs: TorchScript leaves the result uninitialized on the path that has
    not returned yet, but the model's output is a plain tensor."""
    def forward(self, y):
        if y.shape[1] < 5:
            if y.size(0) == 1:
                y = y + 4
            else:
                return y * 2
        return y - 1


class UnrunIntBranch(nn.Module):
    """torchvision RAFT's size check: `w % 8 == 0` sits in an `and` that only the profiling run at the
    odd size evaluates, and that run fails further on (the reshape by 8), so no successful run saw those
    ints. A shape slice that starts before the list's beginning takes the whole list (Python's rule)."""
    def forward(self, x):
        b, c, h, w = x.shape
        if not (h % 8 == 0) and (w % 8 == 0):
            raise ValueError("H and W must be divisible by 8")
        dims = x.shape[-6:]
        y = x.reshape(b, c, h // 8, 8, w // 8, 8)
        return y.mean(dim=(3, 5)) * dims[1] + len(dims)


def fixtures():
    r = torch.randn
    return {
        "ctl_if": lambda: dict(model=DataIf(), inputs=[r(3, 4)]),
        "ctl_loop": lambda: dict(model=CarriedLoop(), inputs=[r(3, 4)]),
        "ctl_listbuild": lambda: dict(model=ListBuild(), inputs=[r(2, 4)]),
        "ctl_dynloop": lambda: dict(model=DynLoop(), inputs=[r(5, 3)], dynamic=["x:0=steps"]),
        "ctl_seq_while": lambda: dict(model=LoopAppend(), inputs=[r(2, 3)],
                                      min_opset=(13, "prim::Loop", "while bool(h.abs().sum() < 60.0):")),
        "ctl_seq_dynloop": lambda: dict(model=DynListLoop(), inputs=[r(5, 3)], dynamic=["x:0=steps"],
                                        min_opset=(13, "prim::Loop", "for i in range(x.size(0)):")),
        "ctl_seq_if": lambda: dict(model=IfList(), inputs=[r(2, 3)],
                                   min_opset=(13, "prim::If", "if bool(x.sum() > 0):")),
        "ctl_list_ops": lambda: dict(model=ListOps(), inputs=[r(3, 4)], dynamic=["x:0=n"], alt_inputs=[r(5, 4)],
                                     min_opset=(11, "aten::__getitem__", "return torch.stack(parts), parts[k] * 10")),
        "ctl_optional_state": lambda: dict(model=OptionalState(), inputs=[r(4, 3)], dynamic=["x:0=steps"],
                                           alt_inputs=[-r(6, 3).abs()],
                                           min_opset=(13, "prim::Loop", "for i in range(x.size(0)):")),
        "ctl_loop_inplace": lambda: dict(model=LoopInPlace(), inputs=[r(3, 2, 4)], dynamic=["x:0=steps"],
                                         alt_inputs=[r(5, 2, 4)], min_opset=(11, "aten::add_", "state[1] += x[i]")),
        "ctl_early_return": lambda: dict(model=EarlyReturn(), inputs=[r(3, 4)], dynamic=["y:0=n,1=m"],
                                         alt_inputs=[r(1, 3)], min_opset=(11, "prim::If", "if y.size(0) == 1:")),
        "ctl_unrun_int_branch": lambda: dict(model=UnrunIntBranch(), inputs=[r(1, 2, 16, 24)],
                                             dynamic=["x:0=b,2=h,3=w"], alt_inputs=[r(2, 2, 32, 8)]),
        "err_ctl_seq_pop": lambda: dict(model=LoopListPop(), inputs=[r(2, 3)],
                                        expect_error="3 aten::pop at zoo_control.py:"),
    }
