"""Case files (docs/spec.md §8): read, validate and turn into an Instance.

Structure is checked against ``case.schema.json`` with ``jsonschema``; meaning (vector
lengths, sums, m < K, exact temperatures, ...) is checked here. Every problem raises
``CaseError`` whose text names the field and what is expected, e.g.::

    draft[""]: must sum to exactly 1 in exact mode, sums to 11/10
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from importlib import resources
from pathlib import Path

import jsonschema

from rheo.reference.instance import Instance, check_law, make_instance
from rheo.reference.numbers import CaseError, parse_exact
from rheo.reference.params import Params, parse_prefix


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(resources.files("rheo.reference").joinpath("case.schema.json").read_text(encoding="utf-8"))


def _field_name(path) -> str:
    parts = list(path)
    out = ""
    for i, part in enumerate(parts):
        if isinstance(part, int):
            out += f"[{part}]"
        elif i > 0 and parts[0] in ("target", "draft") and i == 1:
            out += f'["{part}"]'
        elif i > 0 and parts[i - 1] == "per_prefix":
            out += f'["{part}"]'
        else:
            out += f".{part}" if out else str(part)
    return out or "(case)"


def _schema_error(err: jsonschema.ValidationError) -> CaseError:
    where = _field_name(err.absolute_path)
    v = err.validator
    if v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        name = f"{where}.{extra[0]}" if where != "(case)" and extra else (extra[0] if extra else where)
        return CaseError(name, f"unknown key; allowed keys here: {', '.join(allowed)}")
    if v == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        name = missing[0] if where == "(case)" else f"{where}.{missing[0]}"
        return CaseError(name, "is required (see `rheo exact --help` for the case format)")
    if v == "enum":
        return CaseError(
            where,
            f"must be one of {', '.join(json.dumps(x) for x in err.validator_value)}, "
            f"got {json.dumps(err.instance, default=str)}",
        )
    if v == "type":
        want = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
        return CaseError(where, f"must be of type {want}, got {json.dumps(err.instance, default=str)}")
    if v == "minimum":
        return CaseError(where, f"must be >= {err.validator_value}, got {err.instance}")
    if v == "propertyNames" or v == "pattern":
        return CaseError(
            where,
            'prefix keys are token ids joined by "," ("" for the root, "*" for the default), '
            f"got {json.dumps(err.instance)}",
        )
    if v == "minProperties":
        return CaseError(where, 'must list at least one prefix ("" for the root or "*")')
    if v == "oneOf" and where.startswith("proxy"):
        return CaseError(where, 'must be "rheo", "self", {"constant": c} or {"per_prefix": {prefix: value}}')
    return CaseError(where, err.message)


def _check_prefix_key(key: str, n: int, field: str) -> None:
    if key != "*":
        for t in parse_prefix(key, field):
            if t >= n:
                raise CaseError(field, f'prefix "{key}" names token {t}, but vocab_size is {n}')


def _checked_tables(case: dict) -> dict:
    """JSON Schema, then what only a case file has: every listed vector and prefix key.
    Returns the target and draft tables with their entries parsed to exact rationals.

    The configuration's meaning (m < K, temperatures, proxy ranges, ...) is checked once,
    by ``Params`` (rheo.reference.params), when it is built."""
    if not isinstance(case, dict):
        raise CaseError("(case)", "a case file holds one JSON object")
    validator = jsonschema.Draft202012Validator(schema())
    err = jsonschema.exceptions.best_match(validator.iter_errors(case), key=lambda e: -len(e.absolute_path))
    if err is not None:
        raise _schema_error(err)
    n = case["vocab_size"]
    exact = case.get("arithmetic", "exact") == "exact"
    tables: dict = {"target": {}, "draft": {}}
    for name in tables:
        for key, vec in case[name].items():
            field = f'{name}["{key}"]'
            _check_prefix_key(key, n, field)
            law = [parse_exact(v, f"{field}[{i}]") for i, v in enumerate(vec)]
            check_law(law, n, exact, field)
            tables[name][key] = law
    proxy = case.get("proxy")
    if isinstance(proxy, dict) and "per_prefix" in proxy:
        for key in proxy["per_prefix"]:
            _check_prefix_key(key, n, f'proxy.per_prefix["{key}"]')
    return tables


def load_case(case: dict) -> Instance:
    """A case dict -> Instance; raises CaseError naming the first bad field."""
    tables = _checked_tables(case)
    params = Params.from_case({k: case[k] for k in Params.CASE_KEYS if k in case})
    return make_instance(case["vocab_size"], tables["target"], tables["draft"], params)


def validate_case(case: dict) -> None:
    """Raise CaseError naming the first bad field, or return None for a valid case."""
    load_case(case)


def parse_case_text(text: str, source: str = "case") -> dict:
    try:
        return json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as e:
        raise CaseError(source, f"is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None


def read_case(path) -> dict:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise CaseError(str(path), f"cannot be read ({e.strerror}); give the path of a case JSON file") from None
    except UnicodeDecodeError as e:
        raise CaseError(str(path), f"is not UTF-8 text (byte {e.start}); a case file is JSON in UTF-8") from None
    return parse_case_text(text, str(path))


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
    for name in ("target", "draft"):
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
        if key in ("target", "draft") and isinstance(value, dict):
            rows = [
                f"    {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}"
                for k, v in value.items()
            ]
            lines.append(f"  {json.dumps(key)}: {{\n" + ",\n".join(rows) + f"\n  }}{end}")
        else:
            lines.append(f"  {json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"
