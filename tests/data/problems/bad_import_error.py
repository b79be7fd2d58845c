import torch
import torch.nn as nn
import kernelpilot_module_that_does_not_exist


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.rand(4)]


def get_init_inputs():
    return []
