"""Text from a character language model, one character at a time: the model reads a window of its context length
(the prompt and what was generated so far, its last `context` characters), and the next character is drawn from its
scores at the window's last filled position. Until the window is full, the text sits at its start and the rest is
padding, exactly as training saw the first characters of a window; that needs a causal model (an output at a position
never depends on later positions), which is checked before the first character. Every step has the same shape, so
TinyJit replays the same compiled kernels from the third character on. Drawing uses numpy's generator seeded by the
caller: the same weights, prompt and seed give the same text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from specgrad import Tensor, TinyJit

PAD = 0  # NOTE: what fills the window after the text; a causal model never reads it for the positions used
CAUSAL_ATOL = 1e-4  # NOTE: scores at the last text position with two different paddings must agree within this


def sample(scores: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator) -> int:
    """A character code from one position's scores: the highest with temperature 0, else drawn from
    softmax(scores / temperature) over the top_k highest (all when None); float64 throughout."""
    scores = scores.astype(np.float64)
    if temperature == 0:
        return int(np.argmax(scores))
    if top_k is not None and top_k < len(scores):
        cut = np.partition(scores, -top_k)[-top_k]
        scores = np.where(scores >= cut, scores, -np.inf)
    z = scores / temperature
    p = np.exp(z - z.max())
    return int(rng.choice(len(p), p=p / p.sum()))


class CharGenerator:
    """A model's next-character scores for a text, through one compiled window of `context` codes."""

    def __init__(self, model: Callable[[Tensor], Tensor], context: int):
        self.context = context

        @TinyJit
        def window_scores(tokens: Tensor) -> Tensor:
            return model(tokens).realize()

        self.window_scores = window_scores

    def scores(self, codes: list[int], pad: int = PAD) -> np.ndarray:
        """The scores of the character after `codes` (the last `context` of them are read)."""
        window = codes[-self.context :]
        x = np.full((1, self.context), pad, np.int32)
        x[0, : len(window)] = window
        out = self.window_scores(Tensor(x)).numpy()  # (1, context, vocab)
        return out[0, len(window) - 1].copy()

    def is_causal(self, codes: list[int]) -> bool:
        """Whether the scores after a short text do not depend on the padding that follows it."""
        if len(codes) >= self.context:
            return True
        return bool(np.allclose(self.scores(codes, PAD), self.scores(codes, PAD + 1), atol=CAUSAL_ATOL, rtol=0))

    def generate(self, codes: list[int], tokens: int, temperature: float, top_k: int | None, seed: int
                 ) -> Iterator[int]:  # fmt: skip
        """`tokens` character codes after `codes`, one at a time."""
        rng, text = np.random.default_rng(seed), list(codes)
        for _ in range(tokens):
            code = sample(self.scores(text), temperature, top_k, rng)
            text.append(code)
            yield code
