"""OOM: forward asks for 4 TiB of device memory."""
import torch
from torch import nn

from kernelpilot.extension import load_extension

_ext = load_extension(__file__)


class ModelNew(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        scratch = torch.empty(1 << 40, dtype=torch.float32, device=x.device)
        return _ext.scale_add(x, y, self.alpha, 0) + scratch[:1]
