"""Image input sets for bench/quantize.sh: smooth, structured images rather than white noise.

    /usr/bin/python3 bench/quant_inputs.py OUT.npy COUNT SEED

Each image is a 7x7 grid of normal values per channel, upsampled bicubically to 224x224, plus a
little pixel noise, then standardised per channel (what ImageNet normalisation gives a photo:
mean 0, std 1, mostly low frequencies). Written stacked: [COUNT, 1, 3, 224, 224], float32.
"""
import sys

import numpy as np
import torch


def main():
    out, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    g = torch.Generator().manual_seed(seed)
    low = torch.randn(count, 3, 7, 7, generator=g)
    img = torch.nn.functional.interpolate(low, size=(224, 224), mode="bicubic", align_corners=False)
    img = img + 0.1 * torch.randn(img.shape, generator=g)
    img = (img - img.mean(dim=(2, 3), keepdim=True)) / img.std(dim=(2, 3), keepdim=True)
    np.save(out, img.unsqueeze(1).numpy().astype(np.float32))


if __name__ == "__main__":
    main()
