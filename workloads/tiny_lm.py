"""The tiny transformer language model: token and position embeddings, a causal encoder, a vocabulary head."""

from __future__ import annotations

import torch
from torch import nn

# Heads tried in order; d_model is any integer a sweep samples, so the count must divide it.
HEAD_CHOICES = (4, 2, 1)


def heads_for(d_model: int) -> int:
    return next(heads for heads in HEAD_CHOICES if d_model % heads == 0)


class TinyLM(nn.Module):
    """Next-token logits [batch, seq, vocab] for tokens [batch, seq]; position t sees tokens <= t only."""

    def __init__(self, vocab_size: int, seq_len: int, d_model: int, layers: int, heads: int) -> None:
        super().__init__()
        # Kept so a checkpoint can rebuild the model: TinyLM(**model.config).
        self.config = {
            "vocab_size": vocab_size,
            "seq_len": seq_len,
            "d_model": d_model,
            "layers": layers,
            "heads": heads,
        }
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Embedding(seq_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, heads, dim_feedforward=4 * d_model, dropout=0.0, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        self.register_buffer("causal_mask", nn.Transformer.generate_square_subsequent_mask(seq_len), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        hidden = self.tokens(tokens) + self.positions(torch.arange(length, device=tokens.device))
        hidden = self.encoder(hidden, mask=self.causal_mask[:length, :length], is_causal=True)
        return self.head(self.norm(hidden))
