"""A synthetic language the tiny transformer can learn, generated deterministically from a seed.

Each token is followed by one of a few successors drawn from a seed-chosen table (a sparse
Markov chain), so a model that learns the table drops from ln(vocab) nats to about the
chain's entropy (~0.9 nats) and val_loss falls visibly within a few dozen steps.
Batches are a pure function of (seed, step, rank): a resumed run sees exactly the batches
it would have seen had it never stopped, with no loader state to checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

VOCAB_SIZE = 64
SEQ_LEN = 32
SUCCESSOR_PROBS = (0.6, 0.3, 0.1)
TRAIN_SEQUENCES = 4096
VAL_SEQUENCES = 256
# Distinct generator streams per use, so that train, validation and batch picks never share draws.
_TABLE_STREAM, _TRAIN_STREAM, _VAL_STREAM, _BATCH_STREAM = range(4)


def _generator(seed: int, stream: int, index: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(((seed * 4 + stream) * 1_000_003 + index) % 2**63)


@dataclass(frozen=True)
class SyntheticLanguage:
    """Train and validation sequences of SEQ_LEN + 1 tokens (inputs and shifted targets)."""

    seed: int
    train: torch.Tensor
    val: torch.Tensor

    @classmethod
    def generate(cls, seed: int) -> SyntheticLanguage:
        table = _transition_table(_generator(seed, _TABLE_STREAM))
        return cls(
            seed=seed,
            train=_sample(table, TRAIN_SEQUENCES, _generator(seed, _TRAIN_STREAM)),
            val=_sample(table, VAL_SEQUENCES, _generator(seed, _VAL_STREAM)),
        )

    def batch(
        self, step: int, batch_size: int, rank: int = 0, world_size: int = 1
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's share of the global batch of `step`: (inputs, targets), each [batch_size, SEQ_LEN]."""
        picks = torch.randint(
            len(self.train), (batch_size * world_size,), generator=_generator(self.seed, _BATCH_STREAM, step)
        )
        sequences = self.train[picks[rank * batch_size : (rank + 1) * batch_size]]
        return sequences[:, :-1], sequences[:, 1:]


def _transition_table(generator: torch.Generator) -> torch.Tensor:
    """[VOCAB_SIZE, VOCAB_SIZE] next-token probabilities: a few successors per token."""
    table = torch.zeros(VOCAB_SIZE, VOCAB_SIZE)
    for token in range(VOCAB_SIZE):
        successors = torch.randperm(VOCAB_SIZE, generator=generator)[: len(SUCCESSOR_PROBS)]
        table[token, successors] = torch.tensor(SUCCESSOR_PROBS)
    return table


def _sample(table: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """`count` sequences of SEQ_LEN + 1 tokens, all chains advanced together one position at a time."""
    tokens = torch.empty(count, SEQ_LEN + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(VOCAB_SIZE, (count,), generator=generator)
    for position in range(1, SEQ_LEN + 1):
        tokens[:, position] = torch.multinomial(table[tokens[:, position - 1]], 1, generator=generator).squeeze(1)
    return tokens
