"""The numbers the agent hands its host-API clients: protection domains, distinct across all
of them, and L_Keys and region addresses drawn from one generator the OS seeds per agent."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

from agent.api.requests import U32


class IdSource:
    """Protection domain numbers, L_Keys and region addresses."""

    def __init__(self) -> None:
        self._rng = random.Random(int.from_bytes(os.urandom(8), "big"))
        self._next_pd = 1

    def new_pd(self) -> int:
        """A protection domain number no other client has."""
        pd = self._next_pd
        self._next_pd += 1
        return pd

    def random_key(self, taken: Callable[[int], bool]) -> int:
        """A random non-zero 32-bit key ``taken`` says is free."""
        while True:
            key = self._rng.randint(1, U32)
            if not taken(key):
                return key

    def random_va(self) -> int:
        """A page-aligned address for a region (47 bits, as user space has)."""
        return self._rng.randrange(1 << 32, 1 << 46) & ~0xFFF
