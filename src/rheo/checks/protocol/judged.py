"""The law an implementation is judged against: docs/spec.md §0's p_T, or, when it declares
``sampler_law``, the law its engine samples from when speculation is off
(``JudgedInstance``), and how far the two differ (reported, never a finding).
"""

from __future__ import annotations

from rheo.checks.protocol.inputs import history_of, protocol_config, raw_logits
from rheo.checks.protocol.load import Implementation
from rheo.checks.protocol.outputs import BadOutput
from rheo.checks.protocol.sampler_law import call_sampler_law
from rheo.reference.instance import Instance, Table
from rheo.reference.params import Prefix


class JudgedInstance(Instance):
    """An instance whose ``target_law(prefix)`` is the implementation's ``sampler_law`` on
    the target logits at that prefix (float64). The tables (so the logits the
    implementation is given), the configuration and the draft side are the original's."""

    def __init__(self, inst: Instance, impl: Implementation) -> None:
        super().__init__(inst.n, inst.target, inst.draft, inst.config, target_logits=inst.target_logits)
        self.impl = impl
        self.spec = inst  # the same instance with docs/spec.md §0's target law
        self._protocol = protocol_config(inst)

    def target_law(self, prefix: Prefix) -> tuple:  # floats, where the reference's Law may be Fractions
        law = self._target_cache.get(prefix)
        if law is None:
            logits = raw_logits(self, prefix)
            try:
                law = call_sampler_law(
                    self.impl, logits, self._protocol, self.config.temperature.value, history_of(self, prefix)
                )
            except BadOutput as e:
                raise BadOutput(f"at the target prefix {list(prefix)}: {e}") from None
            self._target_cache[prefix] = law
        return law


def _in_float64(inst: Instance) -> Instance:
    if not inst.exact:
        return inst
    t, d = inst.target, inst.draft
    return Instance(
        inst.n,
        Table("target", {}, fn=lambda pre: tuple(float(x) for x in t(pre))),
        Table("draft", {}, fn=lambda pre: tuple(float(x) for x in d(pre))),
        inst.config.in_arithmetic("float64"),
    )


def judged_instance(impl: Implementation, inst: Instance) -> Instance:
    """The instance an implementation's losslessness is judged on: with ``sampler_law``, a
    float64 ``JudgedInstance`` whose target law at every prefix is
    ``sampler_law(target logits at that prefix, config, T)``; without it, ``inst`` with
    top-k and top-p composed as the implementation declares (``filter_composition``:
    docs/spec.md §0's p_T by default)."""
    if not impl.has_sampler_law:
        return inst.composed(impl.filter_composition)
    return JudgedInstance(_in_float64(inst), impl)


def composition_words(impl: Implementation, cases: list[dict]) -> str:
    """The target law assumed where filters compose (any case with both target_top_k and
    target_top_p), in a few words for a verdict; "" where none does."""
    both = any(c.get("target_top_k") is not None and c.get("target_top_p") is not None for c in cases)
    if not both:
        return ""
    if impl.has_sampler_law:
        return "target law: the implementation's sampler_law"
    if impl.filter_composition == "joint":
        return "target law: top-k and top-p joint (top-p's run on the law before top-k, the sets intersected)"
    return "target law: top-k, then top-p on the renormalised top-k law (docs/spec.md §0)"


def sampler_law_difference(judged: Instance) -> tuple[float, Prefix] | None:
    """max |sampler law - docs/spec.md §0's law| over the prefixes of length <= depth that
    either law reaches, and the first prefix attaining it; None without sampler_law."""
    if not isinstance(judged, JudgedInstance):
        return None
    spec = judged.spec
    best: tuple[float, Prefix] = (0.0, ())
    stack: list[Prefix] = [()]
    seen: set[Prefix] = set()
    while stack:
        prefix = stack.pop()
        if prefix in seen or len(prefix) >= judged.seq_len:
            continue
        seen.add(prefix)
        a, b = judged.target_law(prefix), spec.target_law(prefix)
        gap = max(abs(float(x) - float(y)) for x, y in zip(a, b))
        if gap > best[0] or (gap == best[0] and prefix < best[1]):
            best = (gap, prefix)
        stack.extend(prefix + (x,) for x in range(judged.n) if a[x] > 0 or b[x] > 0)
    return best
