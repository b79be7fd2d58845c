import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench level2/28 (BMM_InstanceNorm_Sum_ResidualAdd_Multiply) at small sizes: InstanceNorm2d
    warns that its input's dim 1 is not num_features, and dynamo breaks the graph at the warning."""

    def __init__(self, in_features, out_features, eps=1e-5, momentum=0.1):
        super(Model, self).__init__()
        self.bmm = nn.Linear(in_features, out_features)
        self.instance_norm = nn.InstanceNorm2d(out_features, eps=eps, momentum=momentum)

    def forward(self, x, y):
        x = self.bmm(x)
        x = self.instance_norm(x.unsqueeze(1).unsqueeze(1)).squeeze(1).squeeze(1)
        x = x + y
        x = x * y
        return x


batch_size = 8
in_features = 16
out_features = 32


def get_inputs():
    return [torch.rand(batch_size, in_features), torch.rand(batch_size, out_features)]


def get_init_inputs():
    return [in_features, out_features]
