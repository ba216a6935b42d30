"""Case files (docs/spec.md §8): read, validate and turn into an Instance.

Structure is checked against ``case.schema.json`` with ``jsonschema``; meaning (vector
lengths, sums, m < K, exact temperatures, ...) is checked here. A bad case raises one
``CaseError`` whose text names the field and what is expected, e.g.::

    draft[""]: must sum to exactly 1 in exact mode, sums to 11/10

and whose ``errors`` list every independent problem found, up to ``MAX_ERRORS``, this
first one first (the schema's errors, each table vector's, the parameters'): a case with
an unknown key, m = K and a law that does not sum to 1 is told all three at once. A
problem that makes the other checks meaningless stops at once: not a JSON object, a key
that is not a string, a file that cannot be read, is too large or nests too deep.

Limits (docs/spec.md §8): a case file holds at most ``MAX_CASE_BYTES`` bytes of UTF-8
text, nests arrays and objects at most ``MAX_NESTING`` deep, and writes every number with
at most ``MAX_DIGITS`` digits and an exponent below ``MAX_DIGITS``; ``depth`` is at most
``MAX_DEPTH`` and an exact temperature 1/k has k <= ``MAX_POWER``; ``n_tokens`` (the new
tokens of one whole generation, the protocol's ``generate``; optional, default depth + 1)
is an integer from 1 to ``MAX_N_TOKENS``. Reading and checking take an optional ``Deadline``
(``rheo exact --timeout``), checked after each number: a huge vocabulary stops in time.
"""

from __future__ import annotations

import json
import numbers
import re
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema

from rheo.reference.deadline import Deadline, paced
from rheo.reference.instance import Instance, Table, check_law, check_logits
from rheo.reference.numbers import CaseError, Law, parse_exact
from rheo.reference.params import Params, parse_prefix
from rheo.reference.stops import check_stops

MAX_CASE_BYTES = 64 * 2**20  # a case file, or a gate counterexample file holding one
MAX_NESTING = 64  # arrays and objects inside each other; a case needs 3, a counterexample file 5
MAX_DIGITS = 4300  # per number (Python's own limit for reading an integer from text)
MAX_POWER = 1000  # exact temperature T = 1/k, k <= MAX_POWER: p^k has k times the digits of p
MAX_DEPTH = 1_000_000  # a cycle's output is continued to depth + 1 tokens
MAX_N_TOKENS = 1_000_000  # the tokens of one whole generation ("n_tokens", default depth + 1)
MAX_ERRORS = 20  # independent errors reported at once; checking stops at this many
TABLES = ("target", "draft", "target_logits")  # target_logits: raw logits instead of target (docs/spec.md §9)
NUMBER_FIELDS: tuple[str, ...] = ("epsilon", "temperature", "target_top_p", "target_min_p")  # and the proxy, tables
NUMBER_FIELDS += (
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
)  # docs/spec.md §9  # besides the tables and the proxy


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(resources.files("rheo.reference").joinpath("case.schema.json").read_text(encoding="utf-8"))


def _field_name(path) -> str:
    parts = list(path)
    out = ""
    for i, part in enumerate(parts):
        if isinstance(part, int):
            out += f"[{part}]"
        elif i > 0 and parts[0] in TABLES and i == 1:
            out += f'["{part}"]'
        elif i > 0 and parts[i - 1] == "per_prefix":
            out += f'["{part}"]'
        else:
            out += f".{part}" if out else str(part)
    return out or "(case)"


def shown(value: Any, limit: int = 80) -> str:
    """A JSON value as an error message shows it: its JSON text, cut to ``limit`` characters.

    >>> shown([1, 2]), shown("x" * 100, limit=30)
    ('[1, 2]', '"xxxxxxxxx... (102 characters)')
    """
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({len(text)} characters)"


_REQUIRED = "is required (see `rheo exact --help` for the case format)"


def _schema_errors(err: jsonschema.ValidationError) -> list[CaseError]:
    """``_schema_error``, with a missing-keys error split into one error per key."""
    if err.validator == "required" and isinstance(err.instance, dict):
        where = _field_name(err.absolute_path)
        missing = [k for k in err.validator_value if k not in err.instance]
        return [
            CaseError(
                k if where == "(case)" else f"{where}.{k}", "is required (see `rheo exact --help` for the case format)"
            )
            for k in missing
        ]
    return [_schema_error(err)]


def _schema_error(err: jsonschema.ValidationError) -> CaseError:
    where = _field_name(err.absolute_path)
    v = err.validator
    if v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        name = f"{where}.{extra[0]}" if where != "(case)" and extra else (extra[0] if extra else where)
        also = f" (also unknown: {', '.join(extra[1:])})" if len(extra) > 1 else ""
        return CaseError(name, f"unknown key{also}; allowed keys here: {', '.join(allowed)}")
    if v == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        name = missing[0] if where == "(case)" else f"{where}.{missing[0]}"
        return CaseError(name, _REQUIRED)
    if v == "enum":
        return CaseError(
            where,
            f"must be one of {', '.join(json.dumps(x) for x in err.validator_value)}, got {shown(err.instance)}",
        )
    if v == "type":
        return _type_error(where, err.validator_value, err.instance)
    if v == "minimum":
        return CaseError(where, f"must be >= {err.validator_value}, got {shown(err.instance)}")
    if (v == "propertyNames" or v == "pattern") and where.startswith(("logit_bias", "sequence_bias")):
        kind = "a token id" if where.startswith("logit_bias") else 'token ids joined by "," (e.g. "3,1")'
        return CaseError(where, f"keys are {kind}, got {shown(err.instance)}")
    if v == "propertyNames" or v == "pattern":
        return CaseError(
            where,
            'prefix keys are token ids joined by "," ("" for the root, "*" for the default), '
            f"got {shown(err.instance)}",
        )
    if v == "minProperties":
        return CaseError(where, 'must list at least one prefix ("" for the root or "*")')
    if v == "oneOf" and where.startswith("proxy"):
        return CaseError(where, 'must be "rheo", "self", {"constant": c} or {"per_prefix": {prefix: value}}')
    return CaseError(where, err.message)


def _type_error(where: str, want: str | list[str], value: Any) -> CaseError:
    want = want if isinstance(want, str) else " or ".join(want)
    return CaseError(where, f"must be of type {want}, got {shown(value)}")


def _check_prefix_key(key: object, n: int, field: str) -> None:
    if not isinstance(key, str):
        spelled = ",".join(map(str, key)) if isinstance(key, tuple) else str(key)
        raise CaseError(
            field,
            f'prefix keys are strings of token ids joined by "," ("" for the root, "*" for the default), '
            f"got the {type(key).__name__} {shown(repr(key))[1:-1]}; write it as {json.dumps(spelled)}",
        )
    if key != "*":
        longest = max(len(t) for t in key.split(","))
        if longest > 18:  # read no longer id (an int read from text costs its length squared)
            raise CaseError(field, f'prefix "{key}" names a token id of {longest} digits, but vocab_size is {n}')
        for t in parse_prefix(key, field):
            if t >= n:
                raise CaseError(field, f'prefix "{key}" names token {t}, but vocab_size is {n}')


_DIGIT_RUN = re.compile(r"\d+")
_EXPONENT = re.compile(r"[eE]\s*([+-]?\d+)")


def check_number_size(value: object, field: str) -> None:
    """At most MAX_DIGITS digits and an exponent below MAX_DIGITS, checked before a number
    is read: reading a longer one takes time that grows with the square of its length.

    >>> check_number_size("1e-99999", "epsilon")
    Traceback (most recent call last):
    ...
    rheo.reference.numbers.CaseError: epsilon: has exponent -99999; a case file's numbers have exponents below 4300
    """
    if isinstance(value, Decimal):
        if not value.is_finite():
            return  # refused when read (parse_exact)
        t = value.as_tuple()
        digits, exponent = len(t.digits), int(t.exponent)
    elif isinstance(value, str):
        if len(value) <= 64 and "e" not in value and "E" not in value:
            return  # the common case, at once
        digits = max((len(run) for run in _DIGIT_RUN.findall(value)), default=0)
        found = _EXPONENT.search(value)
        exponent = 0 if found is None else int(found.group(1)) if len(found.group(1)) <= MAX_DIGITS else MAX_DIGITS
    else:
        return
    if digits > MAX_DIGITS:
        start = str(value)[:12]
        raise CaseError(
            field, f"has a number with {digits} digits ({start}...); a case file's numbers have at most {MAX_DIGITS}"
        )
    if abs(exponent) >= MAX_DIGITS:
        raise CaseError(field, f"has exponent {exponent}; a case file's numbers have exponents below {MAX_DIGITS}")


def _is_json_number_or_string(x: object) -> bool:
    """What the schema's "number" or "string" admits (a bool is neither)."""
    return isinstance(x, str) or (isinstance(x, numbers.Number) and not isinstance(x, bool))


def _law(vec: list, field: str, deadline: Deadline | None, before: int = 0) -> list[Fraction]:
    """One vector of a table, each entry checked as the schema would and read exactly
    (an entry equal to an earlier one is read once: large vocabularies repeat a few values).
    The deadline is checked after each entry, counting ``before`` + the entries read."""
    law = []
    read: dict[tuple[type, object], Fraction] = {}
    for i, v in enumerate(vec):
        if deadline is not None:
            deadline.check(before + i, "table entries read")
        key = (type(v), v) if type(v) in (str, int) or (type(v) is Decimal and v.is_finite()) else None
        x = None if key is None else read.get(key)
        if x is None:
            where = f"{field}[{i}]"
            if not _is_json_number_or_string(v):
                raise _type_error(where, ["number", "string"], v)
            check_number_size(v, where)
            x = parse_exact(v, where)
            if key is not None:
                read[key] = x
        law.append(x)
    return law


def _logits(vec: list, field: str, deadline: Deadline | None, before: int = 0) -> list[float]:
    """One vector of raw logits: numbers, or the string "-inf" (probability 0), read in float64."""
    out = []
    for i, v in enumerate(vec):
        if deadline is not None:
            deadline.check(before + i, "table entries read")
        where = f"{field}[{i}]"
        if not _is_json_number_or_string(v):
            raise _type_error(where, ["number", "string"], v)
        check_number_size(v, where)
        try:
            out.append(float("-inf") if str(v).strip().lower() == "-inf" else float(parse_exact(v, where)))
        except (CaseError, OverflowError):
            raise CaseError(where, f'expected a logit: a float64 number or "-inf", got {shown(v)}') from None
    return out


def _check_keys(case: dict) -> None:
    """Object keys are strings (a Python dict may hold others)."""
    for key in case:
        if not isinstance(key, str):
            raise CaseError("(case)", f"keys are strings, got the {type(key).__name__} {shown(key)}")
    n = case.get("vocab_size")
    n = n if isinstance(n, int) else 0
    for name in TABLES:
        if isinstance(case.get(name), dict):
            for key in case[name]:
                if not isinstance(key, str):
                    _check_prefix_key(key, n, name)
    proxy = case.get("proxy")
    if isinstance(proxy, dict) and isinstance(proxy.get("per_prefix"), dict):
        for key in proxy["per_prefix"]:
            if not isinstance(key, str):
                _check_prefix_key(key, n, "proxy.per_prefix")


def _check_exact_temperature(case: dict) -> None:
    """Exact arithmetic raises probabilities to the power k for T = 1/k: k <= MAX_POWER."""
    if case.get("arithmetic", "exact") != "exact" or case.get("temperature") is None:
        return
    try:
        t = parse_exact(case["temperature"], "temperature")
    except CaseError:
        return  # Params names the problem
    if t > 0 and (1 / t).denominator == 1 and 1 / t > MAX_POWER:
        raise CaseError(
            "temperature",
            f"exact arithmetic takes T = 1/k for k <= {MAX_POWER} (p^k has k times the digits of p), got "
            f'T = 1/{(1 / t).numerator}; use T = 0 (the argmax) or "arithmetic": "float64"',
        )


def _skeleton(case: dict) -> dict:
    """The case with every table vector emptied: the schema checks the structure, and
    ``_law`` checks the entries (the same rule, with a deadline, at C-like cost)."""
    out = dict(case)
    for name in TABLES:
        table = case.get(name)
        if isinstance(table, dict):
            out[name] = {k: ([] if isinstance(v, list) else v) for k, v in table.items()}
    if "target" not in case and "target_logits" in case:
        out["target"] = {"*": []}  # target_logits stands in for the required target (docs/spec.md §9)
    return out


_TOP_KEY = re.compile(r"[^.\[]+")


def _top_key(field: str) -> str:
    """The case's top-level key a field is in: 'proxy.per_prefix["0"]' -> "proxy"."""
    top = _TOP_KEY.match(field)
    return top.group() if top else field


class _Found:
    """The errors found so far, each once, in the order found. ``keys`` holds the case's
    top-level keys that have one (later checks leave those alone). At ``MAX_ERRORS``
    errors, ``add`` raises them all."""

    def __init__(self) -> None:
        self.errors: list[CaseError] = []
        self.keys: set[str] = set()
        self._texts: set[str] = set()

    def add(self, err: CaseError, mark: bool = True) -> None:
        """Add ``err`` (and the errors it carries); ``mark``: its top-level key is left
        alone by later checks."""
        for e in err.errors:
            text = str(e)
            if text in self._texts:
                continue
            self._texts.add(text)
            self.errors.append(e)
            if mark:
                self.keys.add(_top_key(e.field))
            if len(self.errors) >= MAX_ERRORS:
                raise self.error()

    def has(self, err: CaseError) -> bool:
        return str(err) in self._texts

    def error(self) -> CaseError:
        """One CaseError: the first error's field and message, every error in ``errors``."""
        first = self.errors[0]
        return CaseError(first.field, first.message, self.errors)


def _schema_check(case: dict, found: _Found) -> None:
    """Every JSON Schema error; the first is ``best_match``'s, the one a single error named."""
    validator = jsonschema.Draft202012Validator(schema())
    errors = list(validator.iter_errors(_skeleton(case)))
    if not errors:
        return
    key = lambda e: -len(e.absolute_path)
    found.add(_schema_error(jsonschema.exceptions.best_match(errors, key=key)))
    for err in errors:
        for e in _schema_errors(jsonschema.exceptions.best_match([err], key=key)):
            found.add(e)


def _guarded(found: _Found, check: Callable[..., object], *args: Any) -> None:
    """``check(*args)``, a CaseError it raises added to ``found``."""
    try:
        check(*args)
    except CaseError as e:
        found.add(e)


def _check_vector(
    laws: dict, name: str, key: str, vec: list, n: int | None, exact: bool, deadline: Deadline | None, before: int
) -> None:
    """One vector of table ``name``: its prefix key, its entries, its law (``n`` None:
    vocab_size is bad, so the law's sum and signs only), or raw logits for target_logits;
    what is read goes into ``laws[key]``."""
    field = f'{name}["{key}"]'
    if n is not None:
        _check_prefix_key(key, n, field)
    if name == "target_logits":
        logits = _logits(vec, field, deadline, before)
        check_logits(logits, len(logits) if n is None else n, field)
        laws[key] = logits
        return
    law = _law(vec, field, deadline, before)
    check_law(law, len(law) if n is None else n, exact, field, deadline)
    laws[key] = law


def _checked(case: dict, deadline: Deadline | None = None) -> tuple[dict, Params]:
    """JSON Schema, then what only a case file has (every listed vector and prefix key),
    then the configuration's meaning (m < K, temperatures, proxy ranges, ...: ``Params``,
    rheo.reference.params). Returns the target and draft tables with their entries parsed
    to exact rationals, and the parameters; raises one CaseError listing every
    independent problem found (``CaseError.errors``), in this order, the first being the
    one a single error would name."""
    if not isinstance(case, dict):
        raise CaseError("(case)", "a case file holds one JSON object")
    _check_keys(case)
    found = _Found()
    if "target" in case and "target_logits" in case:
        found.add(CaseError("target_logits", "give the target as probabilities (target) or as logits, not both"))
    elif "target_logits" in case and case.get("arithmetic", "exact") == "exact":
        found.add(CaseError("target_logits", 'raw logits need "arithmetic": "float64" (their softmax is not rational)'))
    _schema_check(case, found)
    bad = found.keys  # filled in as errors are found
    for key in NUMBER_FIELDS:
        if key not in bad:
            _guarded(found, check_number_size, case.get(key), key)
    depth = case.get("depth")
    if isinstance(depth, int) and not isinstance(depth, bool) and depth > MAX_DEPTH:
        found.add(CaseError("depth", f"must be <= {MAX_DEPTH}, got {depth}"))
    n_tokens = case.get("n_tokens")
    if isinstance(n_tokens, int) and not isinstance(n_tokens, bool) and n_tokens > MAX_N_TOKENS:
        found.add(
            CaseError(
                "n_tokens",
                f"must be <= {MAX_N_TOKENS}, got {n_tokens}; give the new tokens of one whole generation "
                "(default depth + 1), a few for an exact check",
            )
        )
    if "temperature" not in bad and "arithmetic" not in bad:
        _guarded(found, _check_exact_temperature, case)
    given = case.get("proxy")
    proxy = given if isinstance(given, dict) and "proxy" not in bad else None
    if proxy is not None:
        _guarded(found, check_number_size, proxy.get("constant"), "proxy.constant")
        for key, value in proxy.get("per_prefix", {}).items():
            _guarded(found, check_number_size, value, f'proxy.per_prefix["{key}"]')
    vocab = case.get("vocab_size")
    n = vocab if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab >= 1 else None
    exact = case.get("arithmetic", "exact") == "exact"
    tables: dict = {name: {} for name in TABLES}
    vectors = [
        (name, key, vec)
        for name in TABLES
        if isinstance(case.get(name), dict)
        for key, vec in case[name].items()
        if isinstance(vec, list) and _PREFIX.search(key)
    ]  # the others: the schema said what is wrong
    if deadline is not None:
        deadline.begin("table entries read", sum(len(vec) for _, _, vec in vectors))
    before = 0
    for name, key, vec in vectors:
        _guarded(found, _check_vector, tables[name], name, key, vec, n, exact, deadline, before)
        before += len(vec)
    _guarded(found, check_stops, case, n or 0)  # stop ids below vocab_size (no vocab_size: the schema says so)
    if proxy is not None and n is not None and isinstance(proxy.get("per_prefix"), dict):
        for key in proxy["per_prefix"]:
            if _PREFIX.search(key):
                try:
                    _check_prefix_key(key, n, f'proxy.per_prefix["{key}"]')
                except CaseError as e:
                    found.add(e, mark=False)  # the proxy's values are still checked (Params)
    params = _params(case, found)
    if found.errors:
        raise found.error()
    assert params is not None  # built whenever nothing was found
    return tables, params


_PREFIX = re.compile(schema()["$defs"]["prefix"]["pattern"])  # as the schema reads it (re.search)
_STAND_INS = {"depth": 1, "budget": 1, "m": 0}  # for a required key with an error: the others are still checked
_NEEDED = ("policy", "K")  # without a valid one of these no other parameter can be judged


def _params(case: dict, found: _Found) -> Params | None:
    """``Params`` of the case, each of its errors added to ``found``: a key with an error
    (here or found before) is left out, or replaced by a stand-in, and the rest checked
    again. None when an error was found."""
    cfg = {k: case[k] for k in Params.CASE_KEYS if k in case}
    if any(k in found.keys for k in _NEEDED) or "arithmetic" in found.keys:
        return None  # the schema named it; m < K, beam <= K and exact temperatures hang on it
    for _ in range(len(Params.CASE_KEYS) + 1):
        for key in [k for k in cfg if k in found.keys and k not in _STAND_INS]:
            del cfg[key]
        cfg.update({k: v for k, v in _STAND_INS.items() if k in found.keys})
        try:
            params = Params.from_case(cfg)
        except CaseError as e:
            if found.has(e):
                return None  # found before: leaving keys out changed nothing
            found.add(e)
            key = _top_key(e.field)
            if key not in found.keys or key in _NEEDED or (key in _STAND_INS and cfg.get(key) == _STAND_INS[key]):
                return None  # nothing left to stand in
            continue
        return None if found.errors else params
    return None


def _table(name: str, laws: dict[str, list], exact: bool, deadline: Deadline | None) -> Table:
    """A checked table as the engine reads it: prefix tuples, "*" as the default."""
    conv = (lambda law: tuple(law)) if exact else (lambda law: tuple(float(x) for x in paced(law, deadline)))
    listed: dict[tuple[int, ...], Law] = {parse_prefix(k, name): conv(v) for k, v in laws.items() if k != "*"}
    default = conv(laws["*"]) if "*" in laws else None
    return Table(name, listed, default)


def load_case(case: dict, deadline: Deadline | None = None) -> Instance:
    """A case dict -> Instance; raises one CaseError naming the first bad field, with
    every independent error found in its ``errors`` (at most ``MAX_ERRORS``).

    ``deadline`` bounds the reading of the tables and becomes the instance's deadline
    (``Instance.deadline``): the laws it builds later check it too."""
    tables, params = _checked(case, deadline)
    draft = _table("draft", tables["draft"], params.exact, deadline)
    if "target_logits" in case:
        logits = _table("target_logits", tables["target_logits"], False, deadline)
        return Instance(case["vocab_size"], None, draft, params, deadline, target_logits=logits)
    target = _table("target", tables["target"], params.exact, deadline)
    return Instance(case["vocab_size"], target, draft, params, deadline)


def validate_case(case: dict) -> None:
    """Raise CaseError naming the first bad field (every error found in its ``errors``),
    or return None for a valid case."""
    load_case(case)


class _Numbers:
    """``json.loads`` hooks: every number read is size-checked (``check_number_size``) and
    then the deadline is checked."""

    def __init__(self, source: str, deadline: Deadline | None) -> None:
        self.source, self.deadline, self.count = source, deadline, 0

    def _tick(self) -> None:
        self.count += 1
        if self.deadline is not None:
            self.deadline.check(self.count, "numbers read")

    def decimal(self, text: str) -> Decimal:
        self._tick()
        check_number_size(text, self.source)  # at once unless long or with an exponent
        return Decimal(text)

    def integer(self, text: str) -> int:
        self._tick()
        if len(text) > MAX_DIGITS:
            check_number_size(text, self.source)
        return int(text)


def nesting(value: Any) -> int:
    """How deep arrays and objects nest in a JSON value (0 for a number or a string), found
    without recursion.

    >>> nesting({"target": {"*": [1, 2]}}), nesting([[[]]]), nesting("x")
    (3, 3, 0)
    """
    deepest = 0
    stack = [(value, 1)] if isinstance(value, (list, dict)) else []
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_NESTING:
            break  # deep enough to refuse
        inner = list(item.values()) if isinstance(item, dict) else item
        kinds = set(map(type, inner))
        if list in kinds or dict in kinds:
            stack.extend((x, depth + 1) for x in inner if isinstance(x, (list, dict)))
    return deepest


def parse_case_text(text: str, source: str = "case", deadline: Deadline | None = None) -> Any:
    """The JSON value in ``text`` (numbers with a fraction part as Decimal, so that 0.1
    means 1/10); CaseError naming ``source`` for invalid JSON, deep nesting or an
    over-long number."""
    hooks = _Numbers(source, deadline)
    if deadline is not None:
        deadline.begin("numbers read")
    too_deep = CaseError(
        source, f"nests JSON arrays and objects more than {MAX_NESTING} deep; a case file needs 3 levels"
    )
    try:
        value = json.loads(text, parse_float=hooks.decimal, parse_int=hooks.integer)
    except json.JSONDecodeError as e:
        raise CaseError(source, f"is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except RecursionError:
        raise too_deep from None
    if nesting(value) > MAX_NESTING:
        raise too_deep
    return value


def read_case(path, deadline: Deadline | None = None) -> Any:
    """The JSON value in the file at ``path``: at most MAX_CASE_BYTES bytes of UTF-8 text
    (at most that many bytes are read, whatever the file is)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CASE_BYTES + 1)
    except OSError as e:
        raise CaseError(str(path), f"cannot be read ({e.strerror}); give the path of a case JSON file") from None
    if len(data) > MAX_CASE_BYTES:
        raise CaseError(
            str(path),
            f"is larger than {MAX_CASE_BYTES // 2**20} MiB, the limit for a case file; "
            'give the laws shared by many prefixes once, as the "*" default',
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CaseError(
            str(path), f"is not UTF-8 text (at byte offset {e.start}, counting from 0); a case file is JSON in UTF-8"
        ) from None
    return parse_case_text(text, str(path), deadline)


def case_of(document: Any) -> tuple[Any, str | None]:
    """The case in a file: the document itself, or the ``"case"`` object of a gate
    counterexample file (exact certification, decision equality, output law), with a
    note that says so (None for a plain case)."""
    if isinstance(document, dict) and isinstance(document.get("case"), dict):
        check, impl = document.get("check"), document.get("implementation")
        what = f"{shown(check)} check" if isinstance(check, str) else ""
        what += f"{' of ' if what else ''}{shown(impl)}" if isinstance(impl, str) else ""
        what = f" ({what})" if what else ""
        return document["case"], f'certifying the reference on the "case" of a gate counterexample file{what}'
    return document, None


def to_json_number(x) -> str:
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def builtin_examples() -> dict[str, dict]:
    """The embedded example cases, by name."""
    out = {}
    folder = resources.files("rheo").joinpath("examples")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            out[entry.name[:-5]] = parse_case_text(entry.read_text(encoding="utf-8"), entry.name)
    return out


def compact_tables(case: dict) -> dict:
    """The same case with a table that gives one law at every listed prefix written as "*"."""
    out = dict(case)
    for name in [t for t in TABLES if isinstance(case.get(t), dict)]:
        laws = list(case[name].values())
        if len(laws) > 1 and all(v == laws[0] for v in laws):
            out[name] = {"*": laws[0]}
    return out


def dump_case(case: dict) -> str:
    """Case JSON for people: one key per line, one prefix per line, vectors on one line."""
    lines = ["{"]
    items = list(case.items())
    for i, (key, value) in enumerate(items):
        end = "," if i < len(items) - 1 else ""
        if key in TABLES and isinstance(value, dict):
            rows = [
                f"    {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}"
                for k, v in value.items()
            ]
            lines.append(f"  {json.dumps(key)}: {{\n" + ",\n".join(rows) + f"\n  }}{end}")
        else:
            lines.append(f"  {json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"
