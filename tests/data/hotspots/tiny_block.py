"""A tiny transformer-ish block run for a few steps on the CPU (or the GPU when present)."""

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d: int = 64) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(self.norm(x))
        return x + self.down(torch.nn.functional.gelu(h))


device = "cuda" if torch.cuda.is_available() else "cpu"
model = Block().to(device)
x = torch.randn(8, 32, 64, device=device)
with torch.no_grad():
    for _ in range(100):
        y = model(x)
print("block done", tuple(y.shape))
