"""Rules between columns, written in raw values in the schema: records that break one are impossible.

A schema's top-level ``"rules"`` is a list of texts such as::

    "if AGEP < 15 then SCHL in [1, 2, 3]"
    "DEATH == 1 iff CAUSE is not null"
    "NPF > NOC"
    "not (SEX == 'male' and PREGNANT == true)"

Grammar: ``if A then B``, ``A iff B`` or a condition; conditions combine with ``and``, ``or``,
``not`` and parentheses; a comparison is ``column op value`` (``==``, ``!=``, ``<``, ``<=``, ``>``,
``>=``), ``column op column`` (two numeric columns with one code per value: ``exact`` binning),
``column in [v, ...]`` / ``not in``, ``column is null`` / ``is not null``. Values: numbers, quoted
texts, ``true``/``false``, dates as quoted texts for datetime columns. A column name that is not a
plain word goes in backquotes (`` `income>50K` ``). A comparison with a missing value is false.

A rule is public knowledge (it comes with the schema, never from the data). The encoder makes each
rule's numeric constants bin edges and keeps the categories a rule names out of rare-category
groups (post-processing of public facts), so every rule is decided on every cell of the coded
domain; the cells where it fails become structural zeros (:mod:`privmarg.preprocess.rules`), which
the graphical-model generators never sample. :func:`privmarg.preprocess.rules.violations`
(``TableEncoder.rule_violations``) counts the records of a table that break each rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from .values import DATETIME_UNITS, value_key

__all__ = ["Rule", "parse_rule", "RuleError"]

MAX_RULE_COLUMNS = 4  # a rule's structural zero is a table over its columns' codes
OPS = ("==", "!=", "<=", ">=", "<", ">")
_KEYWORDS = {"if", "then", "iff", "and", "or", "not", "in", "is", "null", "true", "false"}
_TOKEN = re.compile(r"""\s*(?:
    (?P<name>`[^`]+`)
  | (?P<str>'[^']*'|"[^"]*")
  | (?P<num>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<op>==|!=|<=|>=|<|>)
  | (?P<punct>[()\[\],])
  | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
)""", re.VERBOSE)


class RuleError(ValueError):
    pass


@dataclass(frozen=True)
class Compare:  # column op literal
    column: str
    op: str
    value: Any


@dataclass(frozen=True)
class CompareColumns:  # column op column
    left: str
    op: str
    right: str


@dataclass(frozen=True)
class Member:  # column in [...] (negated: not in)
    column: str
    values: tuple
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    column: str
    negated: bool = False


@dataclass(frozen=True)
class Not:
    arg: "Expr"


@dataclass(frozen=True)
class And:
    args: tuple


@dataclass(frozen=True)
class Or:
    args: tuple


Expr = Union[Compare, CompareColumns, Member, IsNull, Not, And, Or]


@dataclass(frozen=True)
class Rule:
    """A parsed rule: ``text`` as written, ``expr`` the condition every record must satisfy."""

    text: str
    expr: Expr

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns the rule reads, in order of first appearance."""
        out: list[str] = []
        for node in _walk(self.expr):
            for c in _node_columns(node):
                if c not in out:
                    out.append(c)
        return tuple(out)

    def comparisons(self) -> list[Compare | CompareColumns | Member | IsNull]:
        return [n for n in _walk(self.expr) if isinstance(n, (Compare, CompareColumns, Member, IsNull))]


def _walk(e: Expr) -> Iterable[Expr]:
    yield e
    if isinstance(e, Not):
        yield from _walk(e.arg)
    elif isinstance(e, (And, Or)):
        for a in e.args:
            yield from _walk(a)


def _node_columns(e: Expr) -> tuple[str, ...]:
    if isinstance(e, (Compare, Member, IsNull)):
        return (e.column,)
    if isinstance(e, CompareColumns):
        return (e.left, e.right)
    return ()


def _tokens(text: str) -> list[tuple[str, Any]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise RuleError(f"rule {text!r}: cannot read it from {text[pos:pos + 12]!r}")
        kind = m.lastgroup
        raw = m.group(kind)
        pos = m.end()
        if kind == "name":
            out.append(("name", raw[1:-1]))
        elif kind == "str":
            out.append(("value", raw[1:-1]))
        elif kind == "num":
            f = float(raw)
            if not math.isfinite(f) or abs(f) >= 2**53:
                raise RuleError(f"rule {text!r}: the number {raw[:20]}{'...' if len(raw) > 20 else ''} is too large")
            out.append(("value", int(raw) if re.fullmatch(r"-?\d+", raw) else f))
        elif kind == "word":
            low = raw.lower()
            if low in ("true", "false"):
                out.append(("value", low == "true"))
            elif low in _KEYWORDS:
                out.append(("kw", low))
            else:
                out.append(("name", raw))
        else:
            out.append((kind, raw))
    return out


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def fail(self, what: str) -> RuleError:
        return RuleError(f"rule {self.text!r}: {what}")

    def peek(self, k: int = 0) -> tuple[str, Any] | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def take(self, kind: str, value: Any = None) -> Any:
        t = self.peek()
        if t is None or t[0] != kind or (value is not None and t[1] != value):
            want = value if value is not None else kind
            got = "the end" if t is None else repr(t[1])
            raise self.fail(f"expected {want!r}, found {got}")
        self.i += 1
        return t[1]

    def at(self, kind: str, value: Any = None) -> bool:
        t = self.peek()
        return t is not None and t[0] == kind and (value is None or t[1] == value)

    def rule(self) -> Expr:
        if self.at("kw", "if"):
            self.take("kw", "if")
            cond = self.expr()
            self.take("kw", "then")
            then = self.expr()
            out: Expr = Or((Not(cond), then))
        else:
            left = self.expr()
            if self.at("kw", "iff"):
                self.take("kw", "iff")
                right = self.expr()
                out = Or((And((left, right)), And((Not(left), Not(right)))))
            else:
                out = left
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.peek()[1]!r}")
        return out

    def expr(self) -> Expr:
        args = [self.conj()]
        while self.at("kw", "or"):
            self.take("kw", "or")
            args.append(self.conj())
        return args[0] if len(args) == 1 else Or(tuple(args))

    def conj(self) -> Expr:
        args = [self.neg()]
        while self.at("kw", "and"):
            self.take("kw", "and")
            args.append(self.neg())
        return args[0] if len(args) == 1 else And(tuple(args))

    def neg(self) -> Expr:
        if self.at("kw", "not"):
            self.take("kw", "not")
            return Not(self.neg())
        if self.at("punct", "("):
            self.take("punct", "(")
            e = self.expr()
            self.take("punct", ")")
            return e
        return self.comparison()

    def comparison(self) -> Expr:
        col = self.take("name")
        if self.at("kw", "is"):
            self.take("kw", "is")
            negated = self.at("kw", "not")
            if negated:
                self.take("kw", "not")
            self.take("kw", "null")
            return IsNull(col, negated)
        if self.at("kw", "not") and self.at("kw", "not") and (self.peek(1) or ("", ""))[1] == "in":
            self.take("kw", "not")
            self.take("kw", "in")
            return Member(col, self.values(), True)
        if self.at("kw", "in"):
            self.take("kw", "in")
            return Member(col, self.values(), False)
        op = self.take("op")
        if self.at("name"):
            return CompareColumns(col, op, self.take("name"))
        return Compare(col, op, self.take("value"))

    def values(self) -> tuple:
        self.take("punct", "[")
        out = [self.take("value")]
        while self.at("punct", ","):
            self.take("punct", ",")
            out.append(self.take("value"))
        self.take("punct", "]")
        return tuple(out)


def parse_rule(text: Any) -> Rule:
    """A :class:`Rule` from its text (:class:`RuleError`, a ``ValueError``, when it cannot be read)."""
    if not isinstance(text, str) or not text.strip():
        raise RuleError(f"a rule must be a non-empty text, got {text!r}")
    return Rule(text.strip(), _Parser(text.strip()).rule())


def check_rules(rules: Sequence[Rule], columns: dict[str, Any]) -> None:
    """Refuse, before any budget is spent, what the encoder could not decide on every cell: unknown
    columns, literals of the wrong kind or not among a categorical column's public values, equality
    on float columns, column-to-column comparisons unless both are numeric with one code per value,
    categorical columns whose values come from DP discovery, more than :data:`MAX_RULE_COLUMNS`
    columns. ``columns``: name → :class:`~privmarg.schema.column.ColumnSpec`."""
    for rule in rules:
        def bad(msg: str) -> RuleError:
            return RuleError(f"rule {rule.text!r}: {msg}")

        if len(rule.columns) > MAX_RULE_COLUMNS:
            raise bad(f"reads {len(rule.columns)} columns, at most {MAX_RULE_COLUMNS}")
        for c in rule.columns:
            if c not in columns:
                raise bad(f"no column {c!r} in the schema")
        for node in rule.comparisons():
            if isinstance(node, IsNull):
                continue
            if isinstance(node, CompareColumns):
                for c in (node.left, node.right):
                    s = columns[c]
                    if not (s.numeric and s.binning == "exact"):
                        raise bad(f"compares columns {node.left!r} and {node.right!r}: both must be integer or "
                                  f"datetime columns with \"binning\": \"exact\" (one code per value), {c!r} is not")
                a, b = columns[node.left], columns[node.right]
                if a.type != b.type or (a.type == "datetime" and a.unit != b.unit):
                    raise bad(f"compares columns {node.left!r} and {node.right!r} of different kinds or units")
                continue
            spec = columns[node.column]
            lits = node.values if isinstance(node, Member) else (node.value,)
            eq = isinstance(node, Member) or node.op in ("==", "!=")
            if spec.type == "categorical":
                if getattr(spec, "dp_values", False):
                    raise bad(f"column {node.column!r} takes its values from DP discovery: a rule needs them listed")
                if not eq:
                    raise bad(f"column {node.column!r} is categorical: compare it with ==, != or in")
                keys = {value_key(v) for v in spec.values}
                for v in lits:
                    if value_key(v) not in keys and not (spec.other and value_key(v) == value_key(spec.other_label)):
                        raise bad(f"{v!r} is not one of column {node.column!r}'s values")
            elif spec.type == "boolean":
                if not eq:
                    raise bad(f"column {node.column!r} is boolean: compare it with == or !=")
                allowed = {value_key(True), value_key(False)} | {value_key(v) for v in (spec.labels or ())}
                for v in lits:
                    if value_key(v) not in allowed:
                        raise bad(f"{v!r} is not true/false for column {node.column!r}")
            elif spec.type == "datetime":
                for v in lits:
                    if not isinstance(v, str):
                        raise bad(f"compare datetime column {node.column!r} with a date in quotes, got {v!r}")
                    datetime_units(spec, v, bad)
            else:
                for v in lits:
                    if isinstance(v, (bool, str)) or not math.isfinite(float(v)):
                        raise bad(f"column {node.column!r} is numeric: {v!r} is not a number")
                if spec.type == "float" and eq:
                    raise bad(f"column {node.column!r} is a float column: compare it with <, <=, > or >= "
                              "(equality of a value inside a bin is not decidable)")


def datetime_units(spec: Any, text: str, bad=None) -> float:
    """A date literal in the column's units since the epoch, with its fraction (``'2000-07-01 12:00'``
    is half a day past a day column's ``2000-07-01``: the comparisons then round it the right way)."""
    import pandas as pd

    try:
        t = pd.Timestamp(text)
    except (ValueError, TypeError, OverflowError):
        t = None
    if t is None or pd.isna(t) or str(text).strip().lower() in ("now", "today"):
        msg = f"{text!r} is not a date"
        raise (bad(msg) if bad else RuleError(msg))
    if t.tzinfo is not None:
        t = t.tz_convert("UTC").tz_localize(None)
    try:
        return t.as_unit("ns").value / DATETIME_UNITS[spec.unit]
    except (OverflowError, ValueError):
        msg = f"{text!r} is outside the dates a column can hold"
        raise (bad(msg) if bad else RuleError(msg)) from None
