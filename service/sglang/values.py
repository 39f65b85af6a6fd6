"""Check one flag and its value against a version's catalogue, and spell it as argv items.

A check never raises for a user's mistake: it returns `ValidationIssue`s naming the field at fault, what
is wrong, and how to fix it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Literal

import msgspec

from service.domain import FlagValue
from service.sglang.flags import FlagCatalogue, FlagSpec, Package
from service.sglang.replacements import replacement_status
from service.sglang.safety import flag_danger, looks_like_flag, unsafe_character, value_danger

Severity = Literal["error", "warning"]

_FLAG_SPELLING = re.compile(r"--[a-z0-9][a-z0-9-]*")
# sglang/srt/utils/common.py: human_readable_int accepts SI (k, M, G, T; decimals allowed) and IEC suffixes.
_HUMAN_INT = re.compile(r"\d+(?:\.\d+)?(?:k|M|G|T)|\d+(?:Ki|Mi|Gi|Ti)|-?\d+")


class ValidationIssue(msgspec.Struct, frozen=True, kw_only=True):
    """One problem found in a scenario, deployment or argv.

    Attributes:
        field: Where the fault is (`deployment.groups[0].server.extra.--enable-ep-moe`, `hardware`).
        message: What is wrong, naming the flag and the SGLang version where it matters.
        hint: How to fix it.
        flag: The launch flag involved, when there is one.
        severity: "error" blocks rendering and launching; "warning" does not.
    """

    field: str
    message: str
    hint: str = ""
    flag: str | None = None
    severity: Severity = "error"

    def __str__(self) -> str:
        tail = f"; {self.hint}" if self.hint else ""
        return f"{self.field}: {self.message}{tail}"


def errors(issues: Collection[ValidationIssue]) -> list[ValidationIssue]:
    """Only the issues that block a launch."""
    return [issue for issue in issues if issue.severity == "error"]


def check_flag(spelling: str, value: FlagValue, catalogue: FlagCatalogue, *, field: str,
               allow: Collection[str] = ()) -> list[ValidationIssue]:
    """Check one `--flag value` pair for `catalogue`'s version.

    Refuses malformed spellings, unknown flags (naming the nearest), abbreviations, removed or superseded
    flags (naming the replacement), dangerous flags not in `allow`, wrong types, values outside choices,
    shell metacharacters and values that look like another flag.
    """
    spec, issues = resolve_flag(spelling, catalogue, field=field)
    if spec is None:
        return issues
    issues += _danger_issues(spec, spelling, value, catalogue.package, field, allow)
    issues += check_value(spec, spelling, value, field=field)
    return issues


def resolve_flag(spelling: str, catalogue: FlagCatalogue, *, field: str) -> tuple[FlagSpec | None, list[ValidationIssue]]:
    """The flag `spelling` names exactly, with any issue about the spelling itself."""
    where = f"{catalogue.package} {catalogue.version}"
    if not _FLAG_SPELLING.fullmatch(spelling):
        shown = spelling.split("=", 1)[0]
        return None, [ValidationIssue(field=field, flag=spelling, message=f"{spelling!r} is not a flag spelling",
                                      hint=f"write the flag as '--name' (e.g. {shown.lower()!r}) and its value apart")]
    status = replacement_status(spelling, catalogue) if catalogue.package == "sglang" else None
    spec = catalogue.get(spelling)
    if status is not None and (status.refused or spec is None):
        return None, [ValidationIssue(field=field, flag=spelling, message=status.message, hint=status.hint)]
    if spec is None:
        return None, [_unknown(spelling, catalogue, field, where)]
    issues = [] if status is None else [
        ValidationIssue(field=field, flag=spelling, message=status.message, hint=status.hint, severity="warning")]
    return spec, issues


def _unknown(spelling: str, catalogue: FlagCatalogue, field: str, where: str) -> ValidationIssue:
    expansions = catalogue.abbreviation_of(spelling)
    if expansions:
        full = " or ".join(expansions[:3])
        return ValidationIssue(field=field, flag=spelling, message=f"{spelling} abbreviates {full} ({where})",
                               hint=f"spell the flag in full: {expansions[0]}")
    nearest = catalogue.nearest(spelling)
    hint = f"did you mean {nearest}?" if nearest else "see `sglang-tuner flags` for the flags of this version"
    return ValidationIssue(field=field, flag=spelling, message=f"unknown flag {spelling} for {where}", hint=hint)


def _danger_issues(spec: FlagSpec, spelling: str, value: FlagValue, package: Package, field: str,
                   allow: Collection[str]) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []
    danger = flag_danger(spec, package)
    if danger is not None and not ({spec.flag, spelling} & set(allow)) and value is not False:
        issues.append(ValidationIssue(
            field=field, flag=spec.flag, message=f"{spec.flag} is refused: it {danger.reason} ({danger.kind})",
            hint=f"an operator must allow {spec.flag!r} explicitly in the service settings"))
    for item in value if isinstance(value, list) else [value]:
        risky = value_danger(spec, str(item), package)
        if risky is not None and f"{spec.flag}={item}" not in allow:
            issues.append(ValidationIssue(
                field=field, flag=spec.flag, message=f"{spec.flag} {item} is refused: it {risky.reason}",
                hint=f"an operator must allow '{spec.flag}={item}' explicitly in the service settings"))
    return issues


def check_value(spec: FlagSpec, spelling: str, value: FlagValue, *, field: str) -> list[ValidationIssue]:
    """Type, arity, choices and safety of one flag's value."""
    if spec.is_bare or (spec.nargs == "?" and isinstance(value, bool)):
        if isinstance(value, bool):
            return []
        return [ValidationIssue(field=field, flag=spelling, message=f"{spelling} is a switch, got {value!r}",
                                hint="write true to pass the flag or false to leave it out")]
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not (spec.is_list or spec.action == "append"):
        return [ValidationIssue(field=field, flag=spelling, message=f"{spelling} takes one value, got a list",
                                hint="give a single value")]
    if isinstance(value, list) and spec.nargs == "+" and not value:
        return [ValidationIssue(field=field, flag=spelling, message=f"{spelling} needs at least one value",
                                hint="give one or more values")]
    issues: list[ValidationIssue] = []
    for item in items:
        issues += _check_item(spec, spelling, item, field)
    return issues


def _check_item(spec: FlagSpec, spelling: str, item: str | int | float, field: str) -> list[ValidationIssue]:
    def issue(message: str, hint: str) -> list[ValidationIssue]:
        return [ValidationIssue(field=field, flag=spelling, message=message, hint=hint)]

    if isinstance(item, bool):
        return issue(f"{spelling} takes a {spec.type} value, got {item}", f"give a {spec.type} value")
    text = format_value(item)
    bad = unsafe_character(text)
    if bad is not None:
        return issue(f"value {text!r} of {spelling} contains {bad}",
                     "launch values are plain words, numbers, paths or URLs; remove the character")
    if not text:
        return issue(f"{spelling} has an empty value", "give a value or leave the flag out")
    if looks_like_flag(text):
        return issue(f"value {text!r} of {spelling} starts with '-' and would be read as another flag",
                     "values may not start with '-'; set each flag under its own name")
    if not _type_matches(spec, item, text):
        return issue(f"{spelling} takes {_type_words(spec)}, got {text!r}", f"give {_type_words(spec)}")
    if spec.choices is not None and text not in {format_value(c) for c in spec.choices}:
        shown = ", ".join(format_value(c) for c in spec.choices[:24])
        return issue(f"{text!r} is not a choice of {spelling}", f"use one of: {shown}")
    return []


def _type_matches(spec: FlagSpec, item: object, text: str) -> bool:
    if spec.type == "int":
        return isinstance(item, int) or re.fullmatch(r"-?\d+", text) is not None
    if spec.type == "float":
        if isinstance(item, int | float):
            return True
        try:
            float(text)
        except ValueError:
            return False
        return True
    if spec.type == "human_readable_int":
        return isinstance(item, int) or _HUMAN_INT.fullmatch(text) is not None
    if spec.type == "json":
        try:
            json.loads(text)
        except ValueError:
            return False
    return True


def _type_words(spec: FlagSpec) -> str:
    return {"int": "an integer", "float": "a number", "human_readable_int": "an integer such as 16384, 16k or 1Mi",
            "json": "a JSON value", "str": "a string", "bool": "true or false"}[spec.type]


def format_value(value: str | int | float) -> str:
    """One argv item for a scalar value (floats keep their shortest exact form: 0.9, not 0.90000001)."""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def flag_tokens(spec: FlagSpec, spelling: str, value: FlagValue) -> list[str]:
    """Argv items for one checked flag, keeping the full spelling it was given (`--tp-size` stays `--tp-size`)."""
    positive = spelling if spelling in (spec.flag, *spec.aliases) else spec.flag
    if isinstance(value, bool):
        if spec.negation is not None and spelling == spec.negation:
            value = not value  # `--no-x = true` means x is off
        if value:
            return [positive]
        return [spec.negation] if spec.negation is not None else []
    items = [format_value(v) for v in (value if isinstance(value, list) else [value])]
    if spec.action == "append":
        return [token for item in items for token in (positive, item)]
    return [positive, *items]
