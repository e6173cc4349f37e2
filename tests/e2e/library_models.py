"""The models of library_models_e2e.py: torchvision detection, segmentation, video, optical flow and
quantized models, torchaudio models and transforms, and three hand-written models in the styles users
write (a UNet, a nanoGPT-style decoder, a YOLO-style head).

Each entry is a Case: how to build the eager module (random weights, eval mode), whether it is scripted or
traced, its example inputs at two sizes, which input axes are dynamic, and how to compare outputs.
Configurations are small where the library allows it, so the whole list runs in minutes.
"""
import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Case:
    name: str
    make: Callable[[], nn.Module]
    # inputs(k) for k in (0, 1): the forward() arguments at the first and second size, as
    # (name, value) pairs in argument order; a list-of-tensors argument is given as its parts
    # ("images.0", ...) and passed to the model as a list.
    inputs: Callable[[int], List[Tuple[str, torch.Tensor]]]
    dynamic: List[str]  # --dynamic specs, NAME:AXIS=LABEL[,AXIS=LABEL]
    mode: str = "script"  # or "trace": the library documents tracing, or the model does not script
    detection: bool = False  # outputs whose lengths depend on the data (boxes, scores, labels, ...)


def _gen(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _randn(seed, *shape):
    return torch.randn(*shape, generator=_gen(seed))


# --- torchvision detection ----------------------------------------------------------------------------

def _scene(seed, h, w):
    """An image in [0, 1] with a smooth background and a few flat rectangles, so that detectors see edges
    and corners rather than noise."""
    g = _gen(seed)
    yy = torch.linspace(0, 1, h).view(h, 1)
    xx = torch.linspace(0, 1, w).view(1, w)
    img = torch.stack([0.3 + 0.4 * yy * xx, 0.2 + 0.3 * xx.expand(h, w), 0.5 - 0.3 * yy.expand(h, w)])
    for _ in range(5):
        y0 = int(torch.randint(0, h - 20, (1,), generator=g))
        x0 = int(torch.randint(0, w - 20, (1,), generator=g))
        y1 = min(h, y0 + 20 + int(torch.randint(0, h // 2, (1,), generator=g)))
        x1 = min(w, x0 + 20 + int(torch.randint(0, w // 2, (1,), generator=g)))
        img[:, y0:y1, x0:x1] = torch.rand(3, 1, 1, generator=g)
    return img.clamp(0, 1)


def _det_inputs(k):
    h, w = [(240, 320), (272, 224)][k]
    return [("images.0", _scene(10 + k, h, w))]


class DetectionOutputs(nn.Module):
    """A detector whose result for its one image is returned as the tuple of the dict's values (boxes, scores,
    labels, ...): torch.jit.trace cannot return a list of dicts."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, images: List[torch.Tensor]):
        return tuple(self.model(images)[0].values())


def _detector(fn, **kw):
    def make():
        import torchvision.models.detection as D
        return DetectionOutputs(getattr(D, fn)(weights=None, weights_backbone=None, **kw))
    return make


# Every score passes the threshold so that random-weight detectors return boxes.
_SMALL = dict(min_size=200, max_size=256)
_RCNN = dict(_SMALL, box_score_thresh=0.0, box_detections_per_img=20, rpn_pre_nms_top_n_test=200,
             rpn_post_nms_top_n_test=100)
_DET_DYN = ["images.0:1=height,2=width"]


class ScriptedDetectionOutputs(nn.Module):
    """A detector to be scripted (torchvision's detectors script): under scripting it returns
    (losses, detections); the dict of the one image, in both modes."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, images: List[torch.Tensor]) -> Dict[str, torch.Tensor]:
        if torch.jit.is_scripting():
            return self.model(images)[1][0]
        return self.model(images)[0]


def _scripted_detector(fn, **kw):
    def make():
        import torchvision.models.detection as D
        return ScriptedDetectionOutputs(getattr(D, fn)(weights=None, weights_backbone=None, **kw))
    return make


# Traced, as torchvision documents for ONNX export.
def _det_case(name, fn, **kw):
    return Case(name, _detector(fn, **kw), _det_inputs, _DET_DYN, mode="trace", detection=True)


DETECTION = [
    _det_case("fasterrcnn_mobilenet_v3_large_320_fpn", "fasterrcnn_mobilenet_v3_large_320_fpn", **_RCNN),
    _det_case("fasterrcnn_resnet50_fpn", "fasterrcnn_resnet50_fpn", **_RCNN),
    _det_case("retinanet_resnet50_fpn", "retinanet_resnet50_fpn", **_SMALL, score_thresh=0.0, detections_per_img=20,
              topk_candidates=100),
    _det_case("ssdlite320_mobilenet_v3_large", "ssdlite320_mobilenet_v3_large", score_thresh=0.0,
              detections_per_img=20, topk_candidates=100),
    _det_case("ssd300_vgg16", "ssd300_vgg16", score_thresh=0.0, detections_per_img=20, topk_candidates=100),
    _det_case("maskrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn", **_RCNN),
    _det_case("keypointrcnn_resnet50_fpn", "keypointrcnn_resnet50_fpn", **_RCNN),
    _det_case("fcos_resnet50_fpn", "fcos_resnet50_fpn", **_SMALL, score_thresh=0.0, detections_per_img=20,
              topk_candidates=100),
    # Scripted: ImageList and LevelMapper objects built in forward, the result dicts changed through
    # the list that holds them, NMS branches only large inputs take, per-level RoI scales computed.
    Case("fasterrcnn_mobilenet_v3_large_320_fpn (scripted)",
         _scripted_detector("fasterrcnn_mobilenet_v3_large_320_fpn", **_RCNN), _det_inputs, _DET_DYN,
         detection=True),
    Case("retinanet_resnet50_fpn (scripted)",
         _scripted_detector("retinanet_resnet50_fpn", **_SMALL, score_thresh=0.0, detections_per_img=20,
                            topk_candidates=100), _det_inputs, _DET_DYN, detection=True),
]


# --- torchvision segmentation and video -----------------------------------------------------------------

def _image_inputs(name="x"):
    def inputs(k):
        shape = [(1, 3, 160, 160), (2, 3, 128, 192)][k]
        return [(name, _randn(20 + k, *shape))]
    return inputs


def _seg(fn, **kw):
    def make():
        import torchvision.models.segmentation as S
        return getattr(S, fn)(weights=None, weights_backbone=None, **kw)
    return make


_IMG_DYN = ["x:0=batch,2=height,3=width"]

SEGMENTATION = [
    Case("fcn_resnet50", _seg("fcn_resnet50", aux_loss=True), _image_inputs(), _IMG_DYN),
    Case("deeplabv3_mobilenet_v3_large", _seg("deeplabv3_mobilenet_v3_large", aux_loss=True), _image_inputs(),
         _IMG_DYN),
    # LRASPP's forward argument is `input`.
    Case("lraspp_mobilenet_v3_large", _seg("lraspp_mobilenet_v3_large"), _image_inputs("input"),
         ["input:0=batch,2=height,3=width"]),
]


def _clip_inputs(k):
    shape = [(1, 3, 8, 64, 64), (2, 3, 12, 64, 64)][k]
    return [("x", _randn(30 + k, *shape))]


def _video(fn):
    def make():
        import torchvision.models.video as V
        return getattr(V, fn)(weights=None)
    return make


VIDEO = [Case(n, _video(n), _clip_inputs, ["x:0=batch,2=time"]) for n in ("r3d_18", "mc3_18", "r2plus1d_18")]


# --- torchaudio ---------------------------------------------------------------------------------------

def _w2v_small(extractor_mode, layer_norm_first):
    def make():
        from torchaudio.models import wav2vec2_model
        return wav2vec2_model(
            extractor_mode=extractor_mode, extractor_conv_layer_config=[(32, 10, 5), (32, 3, 2), (32, 2, 2)],
            extractor_conv_bias=extractor_mode == "layer_norm", encoder_embed_dim=64, encoder_projection_dropout=0.0,
            encoder_pos_conv_kernel=16, encoder_pos_conv_groups=4, encoder_num_layers=2, encoder_num_heads=4,
            encoder_attention_dropout=0.0, encoder_ff_interm_features=128, encoder_ff_interm_dropout=0.0,
            encoder_dropout=0.0, encoder_layer_norm_first=layer_norm_first, encoder_layer_drop=0.0, aux_num_out=12)
    return make


def _wave_len_inputs(k):
    b, n = [(2, 4000), (3, 5600)][k]
    lengths = torch.tensor([[4000, 3100], [5600, 4100, 2300]][k])
    return [("waveforms", _randn(40 + k, b, n)), ("lengths", lengths)]


def _seq_len_inputs(feat, t, seed):
    def inputs(k):
        b = [2, 3][k]
        lengths = torch.tensor([[t, t - 5], [t - 3, t, t - 7]][k])
        return [("input", _randn(seed + k, b, t, feat)), ("lengths", lengths)]
    return inputs


def _emformer_inputs(k):
    b, t = [(2, 17), (3, 25)][k]  # utterance frames + 1 right-context frame
    lengths = torch.tensor([[16, 11], [24, 20, 13]][k])
    return [("input", _randn(50 + k, b, t, 32)), ("lengths", lengths)]


def _audio_inputs(shape_pair, seed, name="x"):
    def inputs(k):
        return [(name, _randn(seed + k, *shape_pair[k]))]
    return inputs


def _taco_inputs(k):
    b, t = [(2, 13), (3, 13)][k]
    lengths = torch.tensor([[13, 9], [13, 10, 6]][k])
    return [("x", _randn(60 + k, b, 64, t)), ("input_lengths", lengths)]


def _ta(fn):
    def make():
        import torchaudio.models as A
        return fn(A)
    return make


def _tt(fn):
    def make():
        import torchaudio.transforms as T
        return fn(T)
    return make


AUDIO = [
    Case("wav2vec2 (small)", _w2v_small("group_norm", False), _wave_len_inputs, ["waveforms:0=batch,1=time",
                                                                                 "lengths:0=batch"]),
    Case("hubert/wav2vec2-large style (small)", _w2v_small("layer_norm", True), _wave_len_inputs,
         ["waveforms:0=batch,1=time", "lengths:0=batch"]),
    # The padding mask has max(lengths) columns, which must be the input's time length: only the batch
    # is dynamic.
    Case("conformer", _ta(lambda A: A.Conformer(input_dim=32, num_heads=4, ffn_dim=64, num_layers=2,
                                                depthwise_conv_kernel_size=7)),
         _seq_len_inputs(32, 20, 70), ["input:0=batch", "lengths:0=batch"]),
    Case("emformer", _ta(lambda A: A.Emformer(input_dim=32, num_heads=4, ffn_dim=64, num_layers=2, segment_length=4,
                                              right_context_length=1)),
         _emformer_inputs, ["input:0=batch,1=time", "lengths:0=batch"]),
    Case("convtasnet (small)", _ta(lambda A: A.ConvTasNet(num_sources=2, enc_kernel_size=16, enc_num_feats=64,
                                                          msk_kernel_size=3, msk_num_feats=32, msk_num_hidden_feats=64,
                                                          msk_num_layers=2, msk_num_stacks=2)),
         _audio_inputs([(1, 1, 800), (2, 1, 1208)], 80, "input"), ["input:0=batch,2=time"]),
    # torchaudio 0.13's DeepSpeech does not script (hardtanh with an int bound): traced.
    Case("deepspeech", _ta(lambda A: A.DeepSpeech(n_feature=40, n_hidden=64, n_class=10)),
         _audio_inputs([(1, 1, 30, 40), (2, 1, 41, 40)], 90), ["x:0=batch,2=time"], mode="trace"),
    Case("wav2letter", _ta(lambda A: A.Wav2Letter(num_classes=10, input_type="mfcc", num_features=13)),
         _audio_inputs([(1, 13, 200), (2, 13, 263)], 100), ["x:0=batch,2=time"]),
    Case("melspectrogram", _tt(lambda T: T.MelSpectrogram(sample_rate=16000, n_fft=400, hop_length=160, n_mels=40)),
         _audio_inputs([(1, 4000), (2, 5280)], 110, "waveform"), ["waveform:0=batch,1=time"]),
    Case("mfcc", _tt(lambda T: T.MFCC(sample_rate=16000, n_mfcc=13, melkwargs=dict(n_fft=400, hop_length=160,
                                                                                   n_mels=40))),
         _audio_inputs([(1, 4000), (2, 5280)], 120, "waveform"), ["waveform:0=batch,1=time"]),
    # Lengths sorted longest first (pack_padded_sequence's default); the longest is the time length.
    Case("tacotron2 encoder", _ta(lambda A: A.Tacotron2(n_symbol=40, encoder_embedding_dim=64, encoder_n_convolution=2,
                                                        encoder_kernel_size=5).encoder),
         _taco_inputs, ["x:0=batch", "input_lengths:0=batch"]),
]


# --- hand-written -------------------------------------------------------------------------------------

class _DoubleConv(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class _Up(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cin // 2, 2, stride=2)
        self.conv = _DoubleConv(cin, cout)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        # Inputs whose size is not a multiple of 8 give skips one pixel larger: pad to the skip.
        dy = x2.size(2) - x1.size(2)
        dx = x2.size(3) - x1.size(3)
        x1 = F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([x2, x1], dim=1))


class UNet(nn.Module):
    def __init__(self, cin=3, classes=2, w=8):
        super().__init__()
        self.inc = _DoubleConv(cin, w)
        self.downs = nn.ModuleList([_DoubleConv(w * 2 ** i, w * 2 ** (i + 1)) for i in range(3)])
        self.ups = nn.ModuleList([_Up(w * 2 ** (i + 1), w * 2 ** i) for i in reversed(range(3))])
        self.outc = nn.Conv2d(w, classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for d in self.downs:
            skips.append(d(F.max_pool2d(skips[-1], 2)))
        y = skips[-1]
        for i, u in enumerate(self.ups):
            y = u(y, skips[-2 - i])
        return self.outc(y)


class _Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(t, t, device=x.device)).view(1, 1, t, t)
        att = att.masked_fill(mask == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class NanoGPT(nn.Module):
    def __init__(self, vocab=50, block=64, d=32, heads=4, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.blocks = nn.ModuleList([_Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


class YoloHead(nn.Module):
    """A small backbone and a YOLOv5-style detect head: per scale, view/permute to (b, anchors, ny, nx, 5 +
    classes), sigmoid, box centres from a grid of the feature map's own size, sizes from anchors."""

    def __init__(self, classes=3):
        super().__init__()
        self.no = classes + 5
        self.na = 3
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.SiLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.SiLU())
        self.stages = nn.ModuleList([nn.Sequential(nn.Conv2d(16 * 2 ** i, 32 * 2 ** i, 3, 2, 1), nn.SiLU())
                                     for i in range(3)])
        self.heads = nn.ModuleList([nn.Conv2d(32 * 2 ** i, self.na * self.no, 1) for i in range(3)])
        self.register_buffer("anchors", torch.tensor([[[10., 13.], [16., 30.], [33., 23.]],
                                                      [[30., 61.], [62., 45.], [59., 119.]],
                                                      [[116., 90.], [156., 198.], [373., 326.]]]))
        self.strides = [8, 16, 32]

    def forward(self, x):
        x = self.stem(x)
        outs = []
        for i, (stage, head) in enumerate(zip(self.stages, self.heads)):
            x = stage(x)
            p = head(x)
            bs, _, ny, nx = p.shape
            p = p.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            yv, xv = torch.meshgrid([torch.arange(ny), torch.arange(nx)], indexing="ij")
            grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()
            anchor_grid = self.anchors[i].view(1, self.na, 1, 1, 2)
            y = p.sigmoid()
            xy = (y[..., 0:2] * 2 - 0.5 + grid) * self.strides[i]
            wh = (y[..., 2:4] * 2) ** 2 * anchor_grid
            y = torch.cat((xy, wh, y[..., 4:]), -1)
            outs.append(y.view(bs, -1, self.no))
        return torch.cat(outs, 1)


def _tokens(k):
    b, t = [(1, 12), (3, 29)][k]
    return [("idx", torch.randint(0, 50, (b, t), generator=_gen(130 + k)))]


HANDWRITTEN = [
    Case("unet (pad to skip)", UNet, _audio_inputs([(1, 3, 100, 120), (2, 3, 87, 133)], 140),
         ["x:0=batch,2=height,3=width"]),
    Case("nanogpt", NanoGPT, _tokens, ["idx:0=batch,1=time"]),
    Case("yolo-style head", YoloHead, _audio_inputs([(1, 3, 128, 160), (2, 3, 96, 224)], 150),
         ["x:0=batch,2=height,3=width"]),
]

# --- optical flow, quantized, more audio ----------------------------------------------------------------

class _FlowOut(nn.Module):
    """RAFT with 3 refinement steps; the last flow field."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, image1, image2):
        return self.model(image1, image2, num_flow_updates=3)[-1]


def _raft():
    import torchvision.models.optical_flow as OF
    return _FlowOut(OF.raft_small(weights=None))


def _image_pair(k):
    shape = [(1, 3, 128, 128), (2, 3, 96, 160)][k]  # multiples of 8, as RAFT requires
    return [("image1", _randn(160 + k, *shape)), ("image2", _randn(170 + k, *shape))]


def _quantized(fn):
    """A torchvision quantizable model, fused, calibrated on three random batches and converted with
    the qnnpack engine (Debian's PyTorch has no fbgemm)."""
    def make():
        import torchvision.models.quantization as Q
        torch.backends.quantized.engine = "qnnpack"
        m = getattr(Q, fn)(weights=None, quantize=False).eval()
        m.fuse_model()
        m.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
        torch.ao.quantization.prepare(m, inplace=True)
        with torch.no_grad():
            for i in range(3):
                m(_randn(180 + i, 2, 3, 224, 224))
        return torch.ao.quantization.convert(m, inplace=True)
    return make


class _WaveRNN(nn.Module):
    def __init__(self):
        super().__init__()
        import torchaudio.models as A
        self.model = A.WaveRNN(upsample_scales=[2, 2, 2], n_classes=16, hop_length=8, n_res_block=2, n_rnn=32,
                               n_fc=32, kernel_size=5, n_freq=20, n_hidden=16, n_output=16)

    def forward(self, waveform, specgram):
        return self.model(waveform, specgram)


def _wavernn_inputs(k):
    b, t = [(1, 10), (2, 13)][k]
    return [("waveform", _randn(190 + k, b, 1, (t - 4) * 8)), ("specgram", _randn(195 + k, b, 1, 20, t))]


def _rnnt():
    import torchaudio.models as A
    return A.emformer_rnnt_model(
        input_dim=20, encoding_dim=32, num_symbols=16, segment_length=4, right_context_length=1,
        time_reduction_input_dim=32, time_reduction_stride=2, transformer_num_heads=4, transformer_ffn_dim=64,
        transformer_num_layers=2, transformer_dropout=0.0, transformer_activation="gelu",
        transformer_left_context_length=4, transformer_max_memory_size=0,
        transformer_weight_init_scale_strategy="depthwise", transformer_tanh_on_mem=True, symbol_embedding_dim=16,
        num_lstm_layers=2, lstm_layer_norm=True, lstm_layer_norm_epsilon=1e-3, lstm_dropout=0.0)


def _rnnt_inputs(k):
    b, t, u = [(2, 18, 5), (3, 26, 7)][k]
    return [("sources", _randn(200 + k, b, t, 20)), ("source_lengths", torch.tensor([[18, 14], [26, 20, 13]][k])),
            ("targets", torch.randint(0, 16, (b, u), generator=_gen(205 + k))),
            ("target_lengths", torch.tensor([[5, 3], [7, 6, 2]][k]))]


def _hdemucs():
    import torchaudio.models as A
    return A.HDemucs(sources=["drums", "rest"], channels=8, growth=2, nfft=4096, depth=6)


MORE = [
    Case("raft_small", _raft, _image_pair, ["image1:0=batch,2=height,3=width", "image2:0=batch,2=height,3=width"]),
    Case("quantized_shufflenet_v2_x1_0", _quantized("shufflenet_v2_x1_0"),
         _audio_inputs([(1, 3, 224, 224), (2, 3, 224, 224)], 210), ["x:0=batch"]),
    Case("wavernn", _WaveRNN, _wavernn_inputs, ["waveform:0=batch,2=samples", "specgram:0=batch,3=frames"]),
    Case("emformer rnnt", _rnnt, _rnnt_inputs, ["sources:0=batch,1=time", "source_lengths:0=batch",
                                                 "targets:0=batch,1=tokens", "target_lengths:0=batch"]),
    # HDemucs does not script; traced, its lengths are fixed (they come from Python ints): batch only.
    Case("hdemucs", _hdemucs, _audio_inputs([(1, 2, 22050), (2, 2, 22050)], 220, "input"), ["input:0=batch"],
         mode="trace"),
]

CASES = DETECTION + SEGMENTATION + VIDEO + AUDIO + HANDWRITTEN + MORE
