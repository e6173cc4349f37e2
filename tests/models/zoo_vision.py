"""torchvision classification models (random weights), scripted and traced; torchvision's detection ops."""
import torch
import torchvision.ops as tvo
import torchvision.models as tvm
from torchvision.models.swin_transformer import SwinTransformer
from torchvision.models.vision_transformer import VisionTransformer


def _rand_bn(m):
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.8, 1.2)
    return m


def fx(model, shape, mode="script", tol=(1e-3, 1e-4), **kw):
    return lambda: dict(model=_rand_bn(model()), inputs=[torch.randn(*shape)], mode=mode, tol=tol, **kw)


def small_vit():
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
                             num_classes=10)


def small_swin():
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 2], window_size=[4, 4],
                           num_classes=10)


class DetectionOps(torch.nn.Module):
    """torchvision.ops.nms and roi_align as detectors use them (RoIs as a [K, 5] tensor and as a list of boxes
    per image, fixed and adaptive sampling)."""

    def forward(self, feat, xy, wh, scores):
        boxes = torch.cat([xy, xy + wh], 1)
        keep = tvo.nms(boxes, scores, 0.4)
        rois = torch.cat([torch.zeros_like(boxes[:, :1]), boxes], 1)
        pooled = tvo.roi_align(feat, rois, (3, 3), spatial_scale=0.5, sampling_ratio=2)
        adaptive = tvo.roi_align(feat, [boxes[:3], boxes[3:]], 2, 0.25, -1)
        return keep, pooled, adaptive


class AlignedRoi(torch.nn.Module):
    def forward(self, feat, rois):
        return tvo.roi_align(feat, rois, (2, 4), spatial_scale=0.5, sampling_ratio=-1, aligned=True)


def _det_inputs():
    xy = torch.rand(12, 2) * 24
    wh = torch.rand(12, 2) * 10 + 0.5
    return [torch.randn(2, 4, 20, 24), xy, wh, torch.rand(12)]


def _aligned_inputs():
    xy = torch.rand(5, 2) * 30
    b = torch.tensor([[0.], [1.], [1.], [0.], [1.]])
    return [torch.randn(2, 3, 20, 24), torch.cat([b, xy, xy + torch.rand(5, 2) * 8 + 0.2], 1)]


def fixtures():
    return {
        "tv_detection_ops": lambda: dict(model=DetectionOps(), inputs=_det_inputs(), data=True,
                                         min_opset=(10, "torchvision::nms", "torch.ops.torchvision.nms(",
                                                    tvo.boxes.nms)),
        "tv_roi_align_aligned": lambda: dict(model=AlignedRoi(), inputs=_aligned_inputs(), data=True,
                                             min_opset=(16, "torchvision::roi_align", "torch.ops.torchvision.roi_align(",
                                                        tvo.roi_align)),
        "tv_resnet18_script": fx(tvm.resnet18, (1, 3, 64, 64)),
        "tv_resnet18_trace": fx(tvm.resnet18, (1, 3, 64, 64), "trace"),
        "tv_resnet18_dynamic": fx(tvm.resnet18, (2, 3, 64, 64), dynamic=["x:0=batch"]),
        "tv_mobilenet_v2_script": fx(tvm.mobilenet_v2, (1, 3, 64, 64)),
        "tv_mobilenet_v2_trace": fx(tvm.mobilenet_v2, (1, 3, 64, 64), "trace"),
        "tv_mobilenet_v3_small_script": fx(tvm.mobilenet_v3_small, (1, 3, 64, 64)),
        "tv_efficientnet_b0_script": fx(tvm.efficientnet_b0, (1, 3, 64, 64), tol=(1e-3, 1e-3)),
        "tv_squeezenet_script": fx(tvm.squeezenet1_1, (1, 3, 64, 64)),
        "tv_shufflenet_script": fx(tvm.shufflenet_v2_x0_5, (1, 3, 64, 64)),
        "tv_regnet_script": fx(tvm.regnet_y_400mf, (1, 3, 64, 64)),
        "tv_densenet_trace": fx(tvm.densenet121, (1, 3, 64, 64), "trace", tol=(1e-3, 1e-3)),
        "tv_googlenet_script": fx(lambda: tvm.googlenet(init_weights=False, aux_logits=False), (1, 3, 64, 64)),
        "tv_convnext_script": fx(tvm.convnext_tiny, (1, 3, 64, 64), tol=(1e-3, 1e-3)),
        "tv_vit_script": fx(small_vit, (1, 3, 32, 32)),
        "tv_vit_trace": fx(small_vit, (1, 3, 32, 32), "trace"),
        "tv_swin_script": fx(small_swin, (1, 3, 32, 32)),
        "tv_swin_trace": fx(small_swin, (1, 3, 32, 32), "trace"),
    }
