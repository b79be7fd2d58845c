import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench level3/36 (LSTMHn) at small sizes: dynamo leaves the nn.LSTM, and so the whole forward, to eager."""

    def __init__(self, input_size, hidden_size, num_layers, output_size, dropout=0.0):
        super(Model, self).__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, dropout=dropout, bidirectional=False)
        self.fc = nn.Linear(hidden_size, output_size)

    def forward(self, x, h0, c0):
        out, state = self.lstm(x, (h0, c0))
        out = self.fc(out[:, -1, :])
        return state[0]


batch_size = 4
sequence_length = 6
input_size = 8
hidden_size = 16
num_layers = 2
output_size = 5


def get_inputs():
    return [torch.rand(batch_size, sequence_length, input_size), torch.rand(num_layers, batch_size, hidden_size),
            torch.rand(num_layers, batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers, output_size, 0.0]
