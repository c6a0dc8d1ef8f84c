"""The family registry: one module per kind of checkpoint (base.py: the shared Family class).

A new family is a Family subclass in its own module here, added to FAMILIES; nothing else in
the converter names an architecture.
"""

from __future__ import annotations

from typing import Any

from .base import Family
from .gemma import GEMMA
from .gemma4 import GEMMA4
from .llama import LLAMA
from .moe import QWEN3_MOE, QWEN35_MOE
from .qwen35 import QWEN35

# The first that matches config.json's model_type converts it; the llama-like family is the
# fallback that names what is not supported.
FAMILIES: tuple[Family, ...] = (GEMMA, GEMMA4, QWEN35, QWEN35_MOE, QWEN3_MOE, LLAMA)


def family_for(cfg: dict[str, Any]) -> Family:
    return next(f for f in FAMILIES if f.matches(cfg))
