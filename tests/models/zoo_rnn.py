"""Recurrent layers (nn.LSTM/GRU/RNN): multi-layer, bidirectional, batch_first, dynamic batch and
sequence length."""
import torch
import torch.nn as nn


class LSTMBidir(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x):
        y, (h, c) = self.rnn(x)
        return y, h, c


class GRUWithState(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 12, num_layers=2)

    def forward(self, x, h0):
        y, h = self.rnn(x, h0)
        return y, h


class RNNTanh(nn.Module):
    def __init__(self, nonlinearity="tanh"):
        super().__init__()
        self.rnn = nn.RNN(8, 10, nonlinearity=nonlinearity, bidirectional=True)

    def forward(self, x):
        y, h = self.rnn(x)
        return y, h


def fixtures():
    return {
        "rnn_lstm_bidir": lambda: dict(model=LSTMBidir(), inputs=[torch.randn(3, 5, 8)],
                                       dynamic=["x:0=batch", "x:1=seq"]),
        "rnn_gru_state": lambda: dict(model=GRUWithState(), inputs=[torch.randn(5, 3, 8), torch.randn(2, 3, 12)],
                                      dynamic=["x:0=seq", "x:1=batch", "h0:1=batch"]),
        "rnn_tanh": lambda: dict(model=RNNTanh(), inputs=[torch.randn(6, 2, 8)], dynamic=["x:0=seq", "x:1=batch"]),
        "rnn_relu": lambda: dict(model=RNNTanh("relu"), inputs=[torch.randn(4, 2, 8)]),
    }
