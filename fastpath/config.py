"""The fastpath's parameters (SPEC sections 1-4), with the reference's names and checks.

``FastConfig.from_reference(config)`` turns a reference ``Config`` (a case file) into the
same algorithm here, which is how the differential tests pair the two engines.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rheo.reference.numbers import CaseError

from .laws import TargetFilters

POLICIES = ("rheo", "topk")
VERIFIERS = ("rheo", "sample_last", "class_law")
DRAFT_LAWS = ("sampled", "dense", "untempered")


@dataclass(frozen=True)
class FastConfig:
    """One tree shape and verifier for a whole batch (temperatures are per request).

    proxy: "rheo" (the paper's, default), "self" (q(Y), wrong on purpose) or a float c in
    (0, 1] (a constant, wrong below the rank bound). ``draft_top_k`` None keeps the whole
    vocabulary. The wrong-on-purpose variants (proxy "self"/constant, tie_break "token",
    verify "sample_last"/"class_law", draft_law "dense"/"untempered") exist for the
    negative controls only.
    """

    K: int = 10
    depth: int = 8
    budget: int = 60
    policy: str = "rheo"
    m: int = 1
    beam: int | None = None
    draft_top_k: int | None = 128
    proxy: object = "rheo"
    epsilon: float = 0.0
    tie_break: str = "slot"
    verify: str = "rheo"
    draft_law: str = "sampled"
    filters: TargetFilters = field(default_factory=TargetFilters)

    @property
    def B(self) -> int:
        return self.K if self.beam is None else self.beam

    @property
    def expansions(self) -> int:
        """The most expansions a tree can have: 1 + B(D-1) (SPEC 3), the length of u_draw."""
        return 1 + self.B * (self.depth - 1)

    def validate(self) -> "FastConfig":
        def need_int(name, value, lo):
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise CaseError(name, f"must be an integer >= {lo}, got {value!r}")

        if self.policy not in POLICIES:
            raise CaseError("policy", f"must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        need_int("K", self.K, 1)
        need_int("depth", self.depth, 1)
        need_int("budget", self.budget, 1)
        if self.policy == "rheo":
            need_int("m", self.m, 0)
            if self.m >= self.K:
                raise CaseError("m", f"must be <= K-1 = {self.K - 1}, got {self.m}")
        if self.beam is not None:
            need_int("beam", self.beam, 1)
            if self.beam > self.K:
                raise CaseError("beam", f"must be <= K = {self.K}, got {self.beam}")
        if self.draft_top_k is not None:
            need_int("draft_top_k", self.draft_top_k, 1)
        if self.proxy not in ("rheo", "self"):
            if isinstance(self.proxy, bool) or not isinstance(self.proxy, (int, float)) or not 0 < self.proxy <= 1:
                raise CaseError("proxy", f"must be \"rheo\", \"self\" or a constant in (0, 1], got {self.proxy!r}")
        if not self.epsilon >= 0:
            raise CaseError("epsilon", f"must be >= 0, got {self.epsilon}")
        if self.tie_break not in ("slot", "token"):
            raise CaseError("tie_break", f"must be \"slot\" or \"token\", got {self.tie_break!r}")
        if self.verify not in VERIFIERS:
            raise CaseError("verify", f"must be one of {', '.join(VERIFIERS)}, got {self.verify!r}")
        if self.draft_law not in DRAFT_LAWS:
            raise CaseError("draft_law", f"must be one of {', '.join(DRAFT_LAWS)}, got {self.draft_law!r}")
        f = self.filters
        if f.top_k is not None:
            need_int("target_top_k", f.top_k, 1)
        if f.top_p is not None and not 0 < f.top_p <= 1:
            raise CaseError("target_top_p", f"must lie in (0, 1], got {f.top_p}")
        if f.min_p is not None and not 0 <= f.min_p <= 1:
            raise CaseError("target_min_p", f"must lie in [0, 1], got {f.min_p}")
        return self

    @staticmethod
    def from_reference(config) -> "FastConfig":
        """The same algorithm as a reference ``Config`` (policy, pools, tree, verifier)."""
        proxy = config.proxy
        if proxy.kind in ("rheo", "self"):
            fast_proxy = proxy.kind
        elif proxy.kind == "constant":
            fast_proxy = float(proxy.value)
        else:
            raise CaseError("proxy", f"the fastpath has no {proxy.kind!r} proxy (reference only)")
        f = config.target_filters
        return FastConfig(
            K=config.K, depth=config.depth, budget=config.budget, policy=config.policy,
            m=config.m if config.m is not None else 0, beam=config.beam,
            draft_top_k=config.draft_top_k, proxy=fast_proxy, epsilon=float(config.epsilon),
            tie_break=config.tie_break, verify=config.verify, draft_law=config.draft_law,
            filters=TargetFilters(f.top_k, None if f.top_p is None else float(f.top_p),
                                  None if f.min_p is None else float(f.min_p)),
        ).validate()
