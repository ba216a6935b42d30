from rheo.casefile import load_case
from rheo.checks.cases.profiles import joint_draw_cap
from rheo.reference import certify


def cap() -> int:
    return joint_draw_cap()


def report(case: dict, enumerator: str = "classes"):
    return certify(load_case(case), enumerator, count_draws=False)


def describe(case: dict) -> str:
    keys = (
        "vocab_size",
        "policy",
        "K",
        "m",
        "depth",
        "budget",
        "beam",
        "temperature",
        "draft_top_k",
        "proxy",
        "verify",
        "draft_law",
        "tie_break",
    )
    return " ".join(f"{k}={case[k]}" for k in keys if k in case)
