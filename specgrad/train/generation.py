"""Text from a character language model, one character at a time, through the same compiled kernels for every
character (TinyJit). Two ways to get the scores of the next character:

- CachedGenerator (every model whose steps have a stepwise form, specgrad.modelspec.decode): each character is fed at
  its position once; attention keeps its keys and values, a recurrent layer its state. When the text fills the context,
  the newest half of it is fed again from position 0 (the positions a model has learned end at its context), so a
  character costs at most two positions on average, whatever the context.
- WindowGenerator (a model with a step that reads other positions): each character reruns a window of the last
  `context` characters; until the window is full, the text sits at its start and the rest is padding, as training saw
  a window's first characters. That needs a causal model, checked before the first character.

Drawing uses numpy's generator seeded by the caller: the same weights, prompt and seed give the same text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from specgrad import Tensor, TinyJit, no_grad
from specgrad.modelspec.decode import Decoder

PAD = 0  # NOTE: what fills the window after the text; a causal model never reads it for the positions used
CAUSAL_ATOL = 1e-4  # NOTE: scores at the last text position with two different paddings must agree within this


class NonFiniteScores(ValueError):
    """The model's scores for a character hold NaN or infinity (its weights overflow float32 on the text): drawing
    from them would give character 0 whatever the text, so generation stops, naming the character."""


def check_scores(scores: np.ndarray, i: int) -> np.ndarray:
    """The scores of the i-th generated character (counting from 1), when every one is a finite number."""
    bad = np.flatnonzero(~np.isfinite(scores))
    if len(bad):
        kind = "NaN" if np.isnan(scores[bad[0]]) else "infinity"
        raise NonFiniteScores(f"the model's scores for character {i} are not finite ({kind} for the code {bad[0]}; "
                              f"{len(bad)} of {scores.size} scores)")  # fmt: skip
    return scores


def sample(scores: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator) -> int:
    """A character code from one position's scores: the highest with temperature 0, else drawn from
    softmax(scores / temperature) over the top_k highest (all when None); float64 throughout."""
    scores = scores.astype(np.float64)
    if temperature == 0:
        return int(np.argmax(scores))
    if top_k is not None and top_k < len(scores):
        cut = np.partition(scores, -top_k)[-top_k]
        scores = np.where(scores >= cut, scores, -np.inf)
    with np.errstate(over="ignore"):  # NOTE: scores - max <= 0, so a tiny T gives -inf (probability 0), never +inf
        p = np.exp((scores - scores.max()) / temperature)
    return int(rng.choice(len(p), p=p / p.sum()))


class Generator:
    """Draws characters from the scores `start` gives after a text and `next` after each character added to it."""

    context: int

    def start(self, codes: list[int]) -> np.ndarray:
        """The scores of the character after `codes`, a new text (its last `context` codes are read)."""
        if not codes:
            raise ValueError("a text to go on from needs at least one character")
        return self._begin(list(codes[-self.context :]))

    def _begin(self, window: list[int]) -> np.ndarray:
        """`start` on the text's last `context` codes (at least one)."""
        raise NotImplementedError

    def next(self, code: int) -> np.ndarray:
        """The scores of the character after the text so far and `code`."""
        raise NotImplementedError

    def generate(self, codes: list[int], tokens: int, temperature: float, top_k: int | None, seed: int
                 ) -> Iterator[int]:  # fmt: skip
        """`tokens` character codes after `codes`, one at a time; NonFiniteScores where the model's scores for one
        are not numbers."""
        rng, scores = np.random.default_rng(seed), self.start(codes)
        for i in range(tokens):
            code = sample(check_scores(scores, i + 1), temperature, top_k, rng)
            yield code
            if i + 1 < tokens:
                scores = self.next(code)


class CachedGenerator(Generator):
    """Scores through a Decoder: one position per character, the state kept between calls. `held` is the end of the
    text the state holds, at positions 0 on: the text's last `context` codes at the start, then each new one; when
    the context is full, its newest `context // 2` (at least 1) are fed again from position 0."""

    def __init__(self, decoder: Decoder):
        self.context = decoder.length

        @TinyJit
        def step(token: Tensor, pos: Tensor) -> Tensor:
            return decoder(token, pos)

        self.step = step
        self.held: list[int] = []

    def _begin(self, window: list[int]) -> np.ndarray:
        self.held = []
        return self._feed(window)

    def next(self, code: int) -> np.ndarray:
        if len(self.held) < self.context:
            return self._feed([code])
        keep = (self.held + [code])[-max(1, self.context // 2) :]
        self.held = []
        return self._feed(keep)

    def _feed(self, codes: list[int]) -> np.ndarray:
        """`codes` (at least one) at the positions after `held`, one step each; the scores after the last."""
        for code in codes:
            pos = len(self.held)
            out = self.step(Tensor(np.array([[code]], np.int32)), Tensor(np.array([pos], np.int32)))
            self.held.append(code)
        return out.numpy()[0, 0].copy()


class WindowGenerator(Generator):
    """Scores through one compiled window of `context` codes, computed anew for every character."""

    def __init__(self, model: Callable[[Tensor], Tensor], context: int):
        self.context = context

        @TinyJit
        @no_grad()
        def window_scores(tokens: Tensor) -> Tensor:
            return model(tokens).realize()

        self.window_scores = window_scores
        self.text: list[int] = []  # NOTE: the last `context` codes of the text

    def _begin(self, window: list[int]) -> np.ndarray:
        self.text = window
        return self.scores(self.text)

    def next(self, code: int) -> np.ndarray:
        self.text = (self.text + [code])[-self.context :]
        return self.scores(self.text)

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
