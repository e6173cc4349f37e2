"""Dicts: models that return Dict[str, Tensor] (torchvision's segmentation models, IntermediateLayerGetter)
or a list of such dicts (detectors), and dict ops inside forward."""
from typing import Dict, List

import torch
import torch.nn as nn


class SegHeads(nn.Module):
    """Returns {'out': ..., 'aux': ...} as torchvision's FCN and DeepLabV3 do."""

    def __init__(self):
        super().__init__()
        self.body = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 4, 1)
        self.aux = nn.Conv2d(8, 4, 1)

    def forward(self, x) -> Dict[str, torch.Tensor]:
        f = torch.relu(self.body(x))
        result: Dict[str, torch.Tensor] = {}
        result["out"] = self.head(f)
        result["aux"] = self.aux(f).sigmoid()
        return result


class DictOps(nn.Module):
    """Construction, overwriting, iteration over keys/values/items, `in`, get with a default, update, len."""

    def forward(self, x):
        d: Dict[str, torch.Tensor] = {"a": x, "b": x * 2}
        d["c"] = x + 1
        d["a"] = d["a"] - 1
        total = torch.zeros_like(x)
        for k in d.keys():
            total = total + d[k]
        for v in d.values():
            total = total * 0.5 + v
        for k, v in d.items():
            if k != "b":
                total = total + v
        if "c" in d:
            total = total + 1
        if "zz" in d:
            total = total * 100
        e = d.get("zz", x * 4)
        d.update({"e": x * 3, "b": x - 5})
        return total * len(d), e, d["b"], d["e"]


class DictEdits(nn.Module):
    """pop (with and without a default), del, setdefault, popitem, copy, clear, dict(); the result keeps the
    insertion order of what is left."""

    def forward(self, x) -> Dict[str, torch.Tensor]:
        d: Dict[str, torch.Tensor] = {"a": x, "b": x + 1, "c": x + 2, "d": x + 3}
        snapshot = d.copy()
        a = d.pop("a")
        z = d.pop("zz", x * 0.5)
        del d["c"]
        s = d.setdefault("b", x * 10) + d.setdefault("n", x * 7)
        # TorchScript's popitem takes the first item, Python's the last: one item keeps both the same.
        k, last = {"p": x * 5}.popitem()
        snapshot["c"] = snapshot["c"] * 3
        r = dict(snapshot)
        r["d"] = a + z + s + last
        snapshot.clear()
        r["left"] = d["b"] * float(len(d) + 10 * len(snapshot))
        return r


class IntKeys(nn.Module):
    """Dict[int, Tensor] output: the keys are no names, so outputs are numbered."""

    def forward(self, x) -> Dict[int, torch.Tensor]:
        d: Dict[int, torch.Tensor] = {}
        for i in range(3):
            d[i * 10] = x[:, i] * float(i + 1)
        return d


class Detections(nn.Module):
    """List[Dict[str, Tensor]] as torchvision's detectors return; with one image the keys name the outputs."""

    def forward(self, x) -> List[Dict[str, torch.Tensor]]:
        scores, idx = x.max(1)
        return [{"scores": scores, "labels": idx}]


class TwoImages(nn.Module):
    """Two dicts with the same keys: the keys would name two outputs each, so outputs are numbered."""

    def forward(self, x) -> List[Dict[str, torch.Tensor]]:
        return [{"boxes": x[0], "scores": x[0].sum(1)}, {"boxes": x[1], "scores": x[1].sum(1)}]


class DictInIf(nn.Module):
    def forward(self, x):
        d: Dict[str, torch.Tensor] = {"a": x}
        if bool(x.sum() > 0):
            d["a"] = x * 2
        return d["a"]


def fixtures():
    r = torch.randn
    return {
        "dict_seg_out": lambda: dict(model=SegHeads(), inputs=[r(1, 3, 16, 16)], dynamic=["x:0=batch,2=h,3=w"]),
        "dict_ops": lambda: dict(model=DictOps(), inputs=[r(2, 3)]),
        "dict_edits": lambda: dict(model=DictEdits(), inputs=[r(2, 3)]),
        "dict_int_keys": lambda: dict(model=IntKeys(), inputs=[r(2, 3)]),
        "dict_detections": lambda: dict(model=Detections(), inputs=[r(4, 5)]),
        "dict_two_images": lambda: dict(model=TwoImages(), inputs=[r(2, 4, 4)]),
        "err_dict_in_if": lambda: dict(model=DictInIf(), inputs=[r(2, 3)],
                                       expect_error="3 aten::_set_item at zoo_dict.py:"),
    }
