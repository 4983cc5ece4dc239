"""How a collective job runs RoCE: the RoCE profile its RC QPs are made with, how many QPs
each rank opens to each peer, and the verbs timeout that overrides the profile's.

A RoCE figure means little without its settings (``agent.roce.profiles``), and a training job
is where they matter most. NCCL opens one connection per channel to a network peer
(``NCCL_NCHANNELS_PER_NET_PEER``, 2) and sends each message whole on the next one in turn; a
rank here does the same with ``qps`` RC QPs to each peer (``collective.rank``), each with its
own UDP source port, so that ECMP hashes them apart. Unless the job says, the count is the
profile's (perftest 1, nccl and adaptive 2).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.io.transport import MAX_QPS
from agent.roce.config import MAX_TIMEOUT_EXPONENT
from agent.roce.profiles import DEFAULT_PROFILE, profile_named


@dataclass(frozen=True)
class RoceSettings:
    """A job's RoCE: its profile, the QPs each rank opens to each peer, and the verbs timeout
    its QPs go to RTS with (None: the profile's)."""

    profile: str
    qps: int
    timeout: int | None = None

    @classmethod
    def resolve(cls, profile: str | None, qps: int | None, timeout: int | None) -> RoceSettings:
        """The settings a job asks for, the profile's where it names none (the default profile
        when it names no profile); ValueError naming what is out of range."""
        chosen = profile_named(profile if profile is not None else DEFAULT_PROFILE)
        if qps is not None and not 1 <= qps <= MAX_QPS:
            raise ValueError(f"QPs to each peer must be in 1..{MAX_QPS}, got {qps}")
        if timeout is not None and not 0 <= timeout <= MAX_TIMEOUT_EXPONENT:
            raise ValueError(f"a verbs timeout is 0..{MAX_TIMEOUT_EXPONENT}, got {timeout}")
        return cls(chosen.name, chosen.qps if qps is None else qps, timeout)

    def describe(self) -> str:
        """In words, for a report: ``profile nccl, 2 QPs to each peer``."""
        qps = f"{self.qps} QP{'s' if self.qps > 1 else ''} to each peer"
        timeout = "" if self.timeout is None else f", timeout {self.timeout}"
        return f"profile {self.profile}, {qps}{timeout}"
