"""The rules a Config value must follow, one per kind of field.

A :class:`Rule` says what a value must be (``expect`` completes "must be ...", the
words of every error message) and checks it (``ok``); :func:`rule_field` attaches a
rule and a help line to a field of :class:`msresnet.config.profile.Config`, which checks every
value against its rule when a Config is built.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from typing import Any


@dataclasses.dataclass(frozen=True)
class Rule:
    """What a value must be: ``expect`` completes "must be ...", ``ok`` checks it."""

    expect: str
    ok: Callable[[Any], bool] = lambda value: True


def positive_int(upper: int | None = None, *, optional: bool = False) -> Rule:
    text = "a positive integer" if upper is None else f"an integer from 1 to {upper}"
    return Rule(text + (" or null" if optional else ""),
                 lambda v: v is None or (v >= 1 and (upper is None or v <= upper)))


def int_at_least(minimum: int) -> Rule:
    return Rule(f"an integer >= {minimum}", lambda v: v >= minimum)


def number(low: float, high: float | None = None, *, low_open: bool = False,
            high_open: bool = True) -> Rule:
    text = f"a number {'>' if low_open else '>='} {low:g}"
    if high is not None:
        text += f" and {'<' if high_open else '<='} {high:g}"

    def ok(v: float) -> bool:
        if not math.isfinite(v) or v < low or (low_open and v == low):
            return False
        return high is None or v < high or (not high_open and v == high)
    return Rule(text, ok)


def choice(options: Sequence[str]) -> Rule:
    return Rule("one of " + ", ".join(repr(o) for o in options), lambda v: v in options)


NON_EMPTY = Rule("a non-empty string", lambda v: v.strip() != "")
OPTIONAL_NON_EMPTY = Rule("a non-empty string or null", lambda v: v is None or v.strip() != "")
MD5 = Rule("an MD5 checksum (32 hex digits) or null",
             lambda v: v is None or re.fullmatch(r"[0-9a-fA-F]{32}", v) is not None)
BOOL = Rule("true or false")
SEED = Rule("an integer from 0 to 2**32 - 1", lambda v: 0 <= v < 2**32)


def rule_field(default: Any, rule: Rule, help: str) -> Any:  # noqa: A002 - "help" reads best
    return dataclasses.field(default=default, metadata={"rule": rule, "help": help})
