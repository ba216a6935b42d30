"""The fastpath's parameters (SPEC sections 1-4), with the reference's names and checks.

``FastConfig.from_reference(config)`` turns a reference ``Config`` (a case file) into the
same algorithm here, which is how the differential tests pair the two engines.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rheo.reference.numbers import CaseError

from .laws import TargetFilters

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
        """The reference's checks (``rheo.reference.Config.validate``: one message per
        field, naming it), on the same algorithm as a reference ``Config``."""
        self.to_reference().validate()
        return self

    def to_reference(self, temperature: float = 1.0):
        """The same algorithm as a reference ``Config`` in float64 arithmetic (the inverse
        of ``from_reference``); ``temperature`` is the one request's T."""
        from rheo.reference.instance import Config, Proxy
        from rheo.reference.numbers import TargetFilters as RefFilters
        from rheo.reference.numbers import Temperature

        p = self.proxy
        if p in ("rheo", "self"):
            proxy = Proxy(p)
        elif isinstance(p, (int, float)) and not isinstance(p, bool):
            proxy = Proxy("constant", value=float(p))
        else:
            raise CaseError("proxy", f"must be \"rheo\", \"self\" or a constant in (0, 1], got {p!r}")
        f = self.filters
        return Config(policy=self.policy, K=self.K, depth=self.depth, budget=self.budget,
                      m=self.m if self.policy == "rheo" else None, beam=self.beam, proxy=proxy,
                      epsilon=float(self.epsilon), tie_break=self.tie_break,
                      temperature=Temperature.parse(repr(float(temperature)), exact=False),
                      draft_top_k=self.draft_top_k, verify=self.verify, draft_law=self.draft_law,
                      target_filters=RefFilters(f.top_k, f.top_p, f.min_p), arithmetic="float64")

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
