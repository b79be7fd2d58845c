"""Cross-entropy loss of a language-model head: bf16 logits over a 128K vocabulary, mean over tokens.

Written as training code usually does it: the logits are upcast to fp32 for the loss.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float(), targets)


tokens = 4096
vocab_size = 128256  # Llama 3 vocabulary; 4096 x 128256 bf16 = 1.05 GB of logits


def get_inputs():
    logits = torch.randn(tokens, vocab_size, dtype=torch.bfloat16)
    targets = torch.randint(0, vocab_size, (tokens,), dtype=torch.int64)
    return [logits, targets]


def get_init_inputs():
    return []
