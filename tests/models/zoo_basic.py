"""Small CNNs and MLPs: the core path every converter change must keep working."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = torch.relu(self.conv2(x))
        x = self.pool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(20, 32)
        self.l2 = nn.Linear(32, 32)
        self.l3 = nn.Linear(32, 5)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        x = torch.tanh(self.l1(x))
        x = self.drop(F.gelu(self.l2(x)))
        return torch.softmax(self.l3(x), dim=-1)


class TwoInputs(nn.Module):
    def forward(self, a, b):
        s = a + b * 2.0
        return s.mean(dim=1), (a - b).abs().sum(), torch.cat([a, b], dim=0)


class EvenSizeSkip(nn.Module):
    """Encoder-decoder with a skip connection: works only at even heights and widths."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(8, 3, 2, stride=2)

    def forward(self, x):
        return x + self.up(torch.relu(self.down(x)))


def _init(m):
    # Non-trivial batchnorm statistics, so running stats matter.
    for mod in m.modules():
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 1.5)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.5, 0.5)
    return m


def fixtures():
    return {
        "cnn_script": lambda: dict(model=_init(SmallCNN()), inputs=[torch.randn(2, 3, 32, 32)]),
        "cnn_trace": lambda: dict(model=_init(SmallCNN()), inputs=[torch.randn(2, 3, 32, 32)], mode="trace"),
        "cnn_dynamic": lambda: dict(model=_init(SmallCNN()), inputs=[torch.randn(2, 3, 32, 32)],
                                    dynamic=["x:0=batch"]),
        "cnn_trainmode": lambda: dict(model=_init(SmallCNN()), inputs=[torch.randn(1, 3, 16, 16)], train_mode=True),
        "mlp_script": lambda: dict(model=MLP(), inputs=[torch.randn(4, 20)]),
        "mlp_trace": lambda: dict(model=MLP(), inputs=[torch.randn(4, 20)], mode="trace"),
        # --dynamic profiles at a second size; one larger is odd here, so the converter doubles instead.
        "cnn_skip_dynamic_hw": lambda: dict(model=EvenSizeSkip(), inputs=[torch.randn(1, 3, 16, 16)],
                                            dynamic=["x:0=batch,2=height,3=width"]),
        # Inputs that do not fit the model: PyTorch's own message and the user's line, exit 2.
        "err_wrong_channels": lambda: dict(model=_init(SmallCNN()), inputs=[torch.randn(1, 5, 16, 16)],
                                           expect_error="2 expected input[1, 5, 16, 16] to have 3 channels"),
        "two_inputs": lambda: dict(model=TwoInputs(), inputs=[torch.randn(3, 4), torch.randn(3, 4)]),
    }
