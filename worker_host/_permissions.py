"""Permission rules, patterns and the authorization order of the plugin contract.

Pure and synchronous: no I/O, no clocks, no plugin code. The tool call pipeline
gives this module a projection's action and resources together with the hook
decision, and gets back either a decision with its `ToolApprovalSource` or
"ask", meaning a client must answer a permission request.

Patterns (rule `action` and `resource`, saved `save` patterns): `*` matches any
run of characters (including none and including `/`), `?` exactly one
character, anything else itself. Backslashes are read as `/` on both sides, and
a pattern ending in ``" *"`` also matches without that suffix, so
``git status *`` matches ``git status``. Characters are Unicode code points.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from ._errors import WorkerHostError

Effect = Literal["allow", "ask", "deny"]
Source = Literal["config", "saved", "hook", "callback", "remote", "default", "timeout", "terminal"]

_RULE_MEMBERS = ("action", "resource", "effect")
_OPTIONAL_SUFFIX = " *"
# Longest member name quoted back in an `invalid_rule` message.
_MAX_QUOTED_NAME = 64


@dataclass(frozen=True)
class PermissionRule:
    """One configured rule; `action` and `resource` are patterns."""

    action: str
    resource: str
    effect: Effect

    @classmethod
    def from_json(cls, value: Any) -> PermissionRule:
        """Reads a rule from configuration JSON.

        The value must be an object with exactly `action` and `resource`
        (non-empty strings) and `effect` (`allow`, `ask` or `deny`). Raises
        `invalid_rule` naming the first problem found.
        """
        if not isinstance(value, dict):
            raise _invalid_rule("A permission rule must be an object.")
        unknown = sorted(str(name) for name in value if name not in _RULE_MEMBERS)
        if unknown:
            name = unknown[0][:_MAX_QUOTED_NAME]
            raise _invalid_rule(f"Permission rule has unknown member {name!r}.")
        for member in _RULE_MEMBERS:
            if member not in value:
                raise _invalid_rule(f"Permission rule is missing {member!r}.")
        action, resource, effect = value["action"], value["resource"], value["effect"]
        if not isinstance(action, str) or not action:
            raise _invalid_rule("Permission rule 'action' must be a non-empty string.")
        if not isinstance(resource, str) or not resource:
            raise _invalid_rule("Permission rule 'resource' must be a non-empty string.")
        if effect == "allow" or effect == "ask" or effect == "deny":
            return cls(action=action, resource=resource, effect=effect)
        raise _invalid_rule("Permission rule 'effect' must be 'allow', 'ask' or 'deny'.")


def _invalid_rule(message: str) -> WorkerHostError:
    return WorkerHostError("invalid_rule", message)


def pattern_matches(pattern: str, value: str, *, case_sensitive: bool = True) -> bool:
    """Whether `value` matches `pattern` in the contract's pattern language.

    Runs in O(len(pattern) * len(value)) time at worst, without recursion,
    whatever the pattern. Without case sensitivity, characters compare
    by a one-to-one simple case fold, so `?` still stands for one character.
    """
    return _matches(_normalise(pattern, case_sensitive), _normalise(value, case_sensitive))


def _normalise(text: str, case_sensitive: bool) -> str:
    text = text.replace("\\", "/")
    if case_sensitive:
        return text
    if text.isascii():
        return text.lower()
    return "".join(map(_fold, text))


@lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    # Full case folding may change a character's length (`ß` -> `ss`), which
    # would change what `?` counts; keep to folds that map one character to one.
    for folded in (char.casefold(), char.lower()):
        if len(folded) == 1:
            return folded
    return char


def _matches(pattern: str, value: str) -> bool:
    """`_glob`, plus the optional trailing ``" *"``; both sides already normalised."""
    if _glob(pattern, value):
        return True
    return pattern.endswith(_OPTIONAL_SUFFIX) and _glob(pattern[: -len(_OPTIONAL_SUFFIX)], value)


def _glob(pattern: str, value: str) -> bool:
    # Greedy matching that remembers only the last `*`: a later `*` can absorb
    # anything an earlier one would, so retrying earlier stars never helps.
    # This keeps the worst case polynomial where a backtracking regex explodes.
    p = v = 0
    star = -1
    resume = 0
    while v < len(value):
        if p < len(pattern) and pattern[p] == "*":
            star, resume = p, v
            p += 1
        elif p < len(pattern) and (pattern[p] == "?" or pattern[p] == value[v]):
            p += 1
            v += 1
        elif star >= 0:
            resume += 1
            p, v = star + 1, resume
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


@dataclass(frozen=True)
class _CompiledRule:
    action: str
    resource: str
    effect: Effect
    denies_every_resource: bool


class Ruleset:
    """Ordered configured rules where the last matching rule wins.

    `layers` are given in the contract's order (host, Session, active Agent)
    and appended, so later layers override earlier ones. `case_sensitive`
    mirrors the host's `permissionMatching.caseSensitive`.
    """

    def __init__(
        self, layers: Sequence[Sequence[PermissionRule]], *, case_sensitive: bool = True
    ) -> None:
        self.rules: tuple[PermissionRule, ...] = tuple(rule for layer in layers for rule in layer)
        self.case_sensitive = case_sensitive
        self._compiled = tuple(
            _CompiledRule(
                action=_normalise(rule.action, case_sensitive),
                resource=_normalise(rule.resource, case_sensitive),
                effect=rule.effect,
                denies_every_resource=rule.effect == "deny" and _only_stars(rule.resource),
            )
            for rule in self.rules
        )

    def __repr__(self) -> str:
        return f"Ruleset({len(self.rules)} rules, case_sensitive={self.case_sensitive})"

    def effect(self, action: str, resource: str) -> Effect | None:
        """The effect of the last rule matching both, or None when no rule matches."""
        action = _normalise(action, self.case_sensitive)
        resource = _normalise(resource, self.case_sensitive)
        for rule in reversed(self._compiled):
            if _matches(rule.action, action) and _matches(rule.resource, resource):
                return rule.effect
        return None

    def projection_effect(self, action: str, resources: Sequence[str]) -> Effect:
        """`deny` if any resource is denied, else `ask` if any asks, else `allow`.

        A resource that no rule matches asks. Raises `invalid_permissions` when
        `resources` is empty: the contract never allows one, and an empty list
        must not pass as allowed.
        """
        _require_resources(resources)
        effects = {self.effect(action, resource) or "ask" for resource in resources}
        if "deny" in effects:
            return "deny"
        if "ask" in effects:
            return "ask"
        return "allow"

    def hides_tool(self, tool_id: str) -> bool:
        """Whether the tool is kept from the model.

        The contract hides a tool when the last rule whose action matches its
        id denies resource `*`: that rule's effect is `deny` and its resource
        pattern is made only of `*`, so it denies every resource. Any later
        rule for the same action, even for one resource, leaves it visible.
        """
        action = _normalise(tool_id, self.case_sensitive)
        for rule in reversed(self._compiled):
            if _matches(rule.action, action):
                return rule.denies_every_resource
        return False


def _only_stars(pattern: str) -> bool:
    return bool(pattern) and pattern.strip("*") == ""


def _require_resources(resources: Sequence[str]) -> None:
    if not resources:
        raise WorkerHostError(
            "invalid_permissions",
            "The tool's permission projection is invalid: "
            "resources must be a non-empty list of strings.",
        )


@dataclass(frozen=True)
class SavedPermission:
    """A Session allow rule stored by an `always` reply: one `save` pattern for one action.

    `action` is the projection's action taken literally, not as a pattern, so
    a plugin cannot widen a saved grant to other actions with `*`.
    """

    action: str
    pattern: str


@dataclass(frozen=True)
class Resolution:
    """The outcome of authorizing one projection without asking anyone.

    `effect` is `ask` when a client must be asked; `source` is then None.
    """

    effect: Effect
    source: Source | None


_ASK = Resolution(effect="ask", source=None)


def resolve_projection(
    ruleset: Ruleset,
    saved: Sequence[SavedPermission],
    action: str,
    resources: Sequence[str],
    hook_decision: Literal["allow", "deny"] | None,
) -> Resolution:
    """Authorizes one projection in the contract's order.

    A configured deny (source `config`), then a hook deny (`hook`), refuses.
    Otherwise a configured allow (`config`), saved permissions covering every
    resource the rules do not allow (`saved`), or a hook allow (`hook`)
    approves; anything left is `ask`. Saved permissions use the ruleset's case
    mode and never override a configured deny. Raises `invalid_permissions`
    when `resources` is empty.
    """
    configured = ruleset.projection_effect(action, resources)
    if configured == "deny":
        return Resolution(effect="deny", source="config")
    if hook_decision == "deny":
        return Resolution(effect="deny", source="hook")
    if configured == "allow":
        return Resolution(effect="allow", source="config")
    if _saved_covers(ruleset, saved, action, resources):
        return Resolution(effect="allow", source="saved")
    if hook_decision == "allow":
        return Resolution(effect="allow", source="hook")
    return _ASK


def _saved_covers(
    ruleset: Ruleset, saved: Iterable[SavedPermission], action: str, resources: Sequence[str]
) -> bool:
    """Whether every resource is allowed by the rules or by a saved pattern for `action`."""
    case_sensitive = ruleset.case_sensitive
    wanted = _normalise(action, case_sensitive)
    patterns = [
        _normalise(permission.pattern, case_sensitive)
        for permission in saved
        if _normalise(permission.action, case_sensitive) == wanted
    ]
    if not patterns:
        return False
    for resource in resources:
        if ruleset.effect(action, resource) == "allow":
            continue
        value = _normalise(resource, case_sensitive)
        if not any(_matches(pattern, value) for pattern in patterns):
            return False
    return True


def saved_from_reply(projection_action: str, save_patterns: Sequence[str]) -> list[SavedPermission]:
    """The Session permissions an `always` reply stores for one projection.

    One per distinct `save` pattern, in order; an absent or empty `save`
    stores nothing, so `always` then acts like `once`.
    """
    patterns = dict.fromkeys(save_patterns)
    return [SavedPermission(action=projection_action, pattern=pattern) for pattern in patterns]
