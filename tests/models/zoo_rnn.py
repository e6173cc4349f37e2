"""Recurrent layers (nn.LSTM/GRU/RNN): multi-layer, bidirectional, batch_first, dynamic batch and
sequence length."""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


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


class Packed(nn.Module):
    """Variable-length batches: pack -> LSTM/GRU -> pad, the lengths an input (so values must be valid)."""
    def __init__(self, cell="lstm", batch_first=True, enforce_sorted=True, total_length: int = 0):
        super().__init__()
        cls = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = cls(6, 7, num_layers=2, bidirectional=True, batch_first=batch_first)
        self.batch_first = batch_first
        self.enforce_sorted = enforce_sorted
        self.total_length = total_length

    def forward(self, x, lengths):
        p = pack_padded_sequence(x, lengths, batch_first=self.batch_first, enforce_sorted=self.enforce_sorted)
        y, h = self.rnn(p)
        out, out_lengths = pad_packed_sequence(y, batch_first=self.batch_first, padding_value=-1.0,
                                               total_length=self.total_length if self.total_length > 0 else None)
        return out, out_lengths, h


def _packed_inputs(batch_first, lengths, steps=6):
    b = len(lengths)
    x = torch.randn(b, steps, 6) if batch_first else torch.randn(steps, b, 6)
    return [x, torch.tensor(lengths)]


def fixtures():
    return {
        "rnn_lstm_bidir": lambda: dict(model=LSTMBidir(), inputs=[torch.randn(3, 5, 8)],
                                       dynamic=["x:0=batch", "x:1=seq"]),
        "rnn_gru_state": lambda: dict(model=GRUWithState(), inputs=[torch.randn(5, 3, 8), torch.randn(2, 3, 12)],
                                      dynamic=["x:0=seq", "x:1=batch", "h0:1=batch"]),
        "rnn_tanh": lambda: dict(model=RNNTanh(), inputs=[torch.randn(6, 2, 8)], dynamic=["x:0=seq", "x:1=batch"]),
        "rnn_relu": lambda: dict(model=RNNTanh("relu"), inputs=[torch.randn(4, 2, 8)]),
        # The longest sequence is shorter than the padded input: the output has max(lengths) steps.
        "rnn_packed_lstm_script": lambda: dict(model=Packed(), inputs=_packed_inputs(True, [5, 3, 2]), data=True),
        "rnn_packed_gru_unsorted_trace": lambda: dict(
            model=Packed("gru", batch_first=False, enforce_sorted=False), inputs=_packed_inputs(False, [2, 6, 4, 1]),
            mode="trace", data=True,  # traced: the model's line that calls into torch, not torch's
            min_opset=(10, "aten::scatter", "p = pack_padded_sequence(")),
        "rnn_packed_total_length": lambda: dict(
            model=Packed(total_length=8), inputs=_packed_inputs(True, [5, 3]), data=True,
            dynamic=["x:0=batch", "lengths:0=batch"], alt_inputs=_packed_inputs(True, [6, 4, 2])),
    }
