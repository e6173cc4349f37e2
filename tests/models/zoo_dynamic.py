"""Shape-generic conversion: ops on dims that are dynamic (--dynamic) or computed by the model.
Each fixture has alt_inputs at other sizes along its dynamic axes; the ONNX model must match
PyTorch there too, so a size frozen into the graph fails."""
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F


class DynShape(nn.Module):
    def forward(self, x):
        a = x.select(1, -1) + x.narrow(1, -2, 1).squeeze(1)
        c1, c2 = x.chunk(2, dim=1)
        p = x.split(2, dim=1)
        r = x.roll(shifts=3, dims=1) + x.roll(-1)
        s = x.sort(dim=1)[0] - x.sort(dim=1, descending=True)[0].flip(1)
        q = x.unsqueeze(1).squeeze(1)
        return a, c1 * 2, c2, p[0], p[1], r, s, q, F.glu(x, dim=1)


class DynCreate(nn.Module):
    def forward(self, x):
        n = x.size(1)
        e = torch.eye(n) + torch.eye(n, x.size(0))[: n, :1]
        pad = x.size(1) % 3
        y = F.pad(x, [1, pad])  # pads computed from a size
        return e, y, torch.where(x > 0)[1], torch.arange(n, dtype=torch.long) * 2


class DynPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(3, affine=False, track_running_stats=False)
        self.inorm = nn.InstanceNorm2d(3)

    def forward(self, x):
        a = F.adaptive_avg_pool2d(x, (2, 3))
        b = F.adaptive_max_pool2d(x, 2)
        up = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        up2 = F.interpolate(x, size=(x.size(2) * 2, x.size(3) + 1), mode="nearest")
        m, i = F.max_pool2d(x, 2, return_indices=True)
        return a, b, up, up2, m, i, self.bn(x), self.inorm(x), F.pixel_unshuffle(x, 2)


class UNetSkip(nn.Module):
    """The UNet up-step: pad the upsampled map to its skip's size, both computed."""
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 4, 2, stride=2)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        dy = x2.size(2) - x1.size(2)
        dx = x2.size(3) - x1.size(3)
        x1 = F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return torch.cat([x2, x1], dim=1)


class WriteViews(nn.Module):
    """In-place writes through views reach the viewed tensor (and a later read sees them)."""
    def forward(self, x, y):
        z = x.clone()
        z[:, 1:3] = y[:, :2]  # copy_ into a slice
        z[0] += 1.0  # add_ on a select
        z[:, -1:].mul_(2.0)
        w = z.transpose(0, 1)
        w[1].zero_()
        z.view(-1)[0] = -5.0
        n = z.size(1)
        z[:, n - 2] = y[:, 0]  # a computed index
        return z, w.sum()


class Grid(nn.Module):
    """YOLO-style grids from the feature map's own size, "ij" and "xy" indexing, 0-d parts, one part."""
    def forward(self, x):
        ny, nx = x.shape[2], x.shape[3]
        yv, xv = torch.meshgrid([torch.arange(ny), torch.arange(nx)], indexing="ij")
        grid = torch.stack((xv, yv), 2).view(1, ny, nx, 2).float()
        a, b, s = torch.meshgrid(x[0, 0, 0], x[0, 1, :, 0] * 2, x[0, 0, 0, 0], indexing="xy")
        (m,) = torch.meshgrid([x[0, 0, 0, :3]], indexing="ij")
        return x.permute(0, 2, 3, 1)[..., :2] + grid, a - b + s, m


class FitBox(nn.Module):
    """What torchvision's detectors do with an image: scale it to fit a box (the sizes follow the aspect
    ratio), split by computed counts, resize to a fixed size, read the shape as a tensor."""
    def forward(self, x):
        h, w = x.shape[-2], x.shape[-1]
        scale = min(16.0 / h, 20.0 / w)
        y = F.interpolate(x, size=[int(h * scale), int(w * scale)], mode="nearest")
        top = y.shape[2] // 2
        a, b = y.split([top, y.shape[2] - top], 2)
        z = F.interpolate(x, size=[5, 6], mode="bilinear", align_corners=False)
        return a.sum(2), b, z, torch._shape_as_tensor(y)


def fixtures():
    r = torch.randn
    return {
        "dyn_shape": lambda: dict(model=DynShape(), inputs=[r(2, 6)], dynamic=["x:1=n"], alt_inputs=[r(2, 10)],
                                  min_opset=(10, "aten::roll", "r = x.roll(shifts=3, dims=1)")),
        "dyn_create": lambda: dict(model=DynCreate(), inputs=[r(3, 4)], dynamic=["x:0=m,1=n"], alt_inputs=[r(5, 7)],
                                   min_opset=(11, "aten::pad", "y = F.pad(x, [1, pad])")),
        "dyn_pool": lambda: dict(model=DynPool(), inputs=[r(2, 3, 8, 12)], dynamic=["x:2=h,3=w"],
                                 alt_inputs=[r(2, 3, 10, 6)], tol=(1e-4, 1e-5),
                                 min_opset=(11, "aten::upsample_bilinear2d", 'mode="bilinear"')),
        "dyn_write_views": lambda: dict(model=WriteViews(), inputs=[r(3, 5), r(3, 4)], dynamic=["x:1=n"],
                                        alt_inputs=[r(3, 7), r(3, 4)],
                                        min_opset=(11, "aten::copy_", "z[:, 1:3] = y[:, :2]")),
        "dyn_write_views_trace": lambda: dict(model=WriteViews(), inputs=[r(3, 5), r(3, 4)], mode="trace",
                                              min_opset=(11, "aten::copy_", "z[:, 1:3] = y[:, :2]")),
        "dyn_meshgrid": lambda: dict(model=Grid(), inputs=[r(1, 3, 4, 6)], dynamic=["x:2=h,3=w"],
                                     alt_inputs=[r(1, 3, 7, 5)]),
        "dyn_fit_box": lambda: dict(model=FitBox(), inputs=[r(1, 3, 8, 12)], dynamic=["x:2=h,3=w"],
                                    alt_inputs=[r(1, 3, 12, 7)], tol=(1e-4, 1e-5),
                                    min_opset=(11, "aten::upsample_nearest2d", 'mode="nearest")')),
        "dyn_unet_skip": lambda: dict(model=UNetSkip(), inputs=[r(1, 4, 4, 5), r(1, 4, 9, 11)],
                                      dynamic=["x1:2=h1,3=w1", "x2:2=h2,3=w2"],
                                      alt_inputs=[r(1, 4, 6, 3), r(1, 4, 13, 7)], tol=(1e-4, 1e-5),
                                      min_opset=(11, "aten::pad", "x1 = F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])")),
    }
