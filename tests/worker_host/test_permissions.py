"""Permission patterns, rulesets and the contract's authorization order."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker_host._errors import WorkerHostError
from worker_host._permissions import (
    PermissionRule,
    Resolution,
    Ruleset,
    SavedPermission,
    pattern_matches,
    resolve_projection,
    saved_from_reply,
)

PROPERTY = settings(max_examples=400, deadline=None, database=None)


def rule(action: str, resource: str, effect: Any) -> PermissionRule:
    return PermissionRule(action=action, resource=resource, effect=effect)


# -- patterns ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        # The empty pattern matches only the empty value.
        ("", "", True),
        ("", "a", False),
        ("", " ", False),
        # `*` alone, and runs of stars, match anything, `/` and newlines included.
        ("*", "", True),
        ("*", "a/b/c", True),
        ("*", "line\nbreak", True),
        ("**", "", True),
        ("**", "any/thing", True),
        ("a**b", "ab", True),
        ("a**b", "a/x/b", True),
        ("*.py", "src/deep/x.py", True),
        ("*.py", "x.pyc", False),
        ("src/*", "src/", True),
        ("src/*", "src", False),
        # `?` is exactly one character, never none and never two.
        ("?", "", False),
        ("?", "a", True),
        ("?", "/", True),
        ("?", "\n", True),
        ("?", "ab", False),
        ("??", "ab", True),
        ("a?c", "abc", True),
        ("a?c", "ac", False),
        ("a?c", "abbc", False),
        ("*?", "", False),
        ("*?", "x", True),
        # Literal characters are compared exactly.
        ("read", "read", True),
        ("read", "reads", False),
        ("read", "rea", False),
        ("Read", "read", False),
        # A trailing " *" also matches the value without that suffix.
        ("git status *", "git status", True),
        ("git status *", "git status ", True),
        ("git status *", "git status --short", True),
        ("git status *", "git statusx", False),
        ("git status *", "git stat", False),
        ("git status *", "git  status", False),
        (" *", "", True),
        (" *", " ", True),
        (" *", " x", True),
        (" *", "x", False),
        # Only a final " *" is special: in the middle it is a literal space then a star.
        ("git * --force", "git push --force", True),
        ("git * --force", "git --force", False),
        ("a *b", "a", False),
        ("a *b", "ab", False),
        ("a *b", "a xb", True),
        # "x **" ends in "**", not " *", so the suffix is not optional.
        ("x **", "x", False),
        ("x **", "x y", True),
        ("x? *", "x", False),
        ("x? *", "xy", True),
        # Backslashes are read as "/" on both sides; they never escape anything.
        ("src\\*.py", "src/a.py", True),
        ("src/*.py", "src\\a.py", True),
        ("C:\\Users\\*", "C:\\Users\\me\\file", True),
        ("C:\\Users\\*", "C:/Users/me", True),
        ("a\\b", "a/b", True),
        ("a/b", "a\\b", True),
        ("\\*", "*", False),
        ("\\*", "/x", True),
        ("\\?", "?", False),
        ("\\?", "\\x", True),
        # Regex metacharacters are literal.
        (".", "a", False),
        (".", ".", True),
        ("a.c", "abc", False),
        ("a+", "aa", False),
        ("a+", "a+", True),
        ("(a)", "a", False),
        ("(a)", "(a)", True),
        ("(a", "(a", True),
        ("[ab]", "a", False),
        ("[ab]", "[ab]", True),
        ("[", "[", True),
        ("^a$", "a", False),
        ("^a$", "^a$", True),
        ("a|b", "a", False),
        ("a|b", "a|b", True),
        ("a{2}", "aa", False),
        ("a{2}", "a{2}", True),
        ("\\d", "1", False),
        ("\\d", "/d", True),
        ("$*", "$HOME", True),
        # Unicode: characters are code points, with no normalisation.
        ("café *", "café", True),
        ("café", "cafe", False),
        ("?", "é", True),
        ("?", "🙂", True),
        ("??", "🙂", False),
        ("日本*", "日本語", True),
        ("é", "e\u0301", False),
        ("É", "é", False),
    ],
)
def test_pattern_matches(pattern: str, value: str, expected: bool) -> None:
    assert pattern_matches(pattern, value) is expected


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("READ", "read", True),
        ("read", "READ", True),
        ("Git Status *", "git status", True),
        ("Git Status *", "GIT STATUS -S", True),
        ("C:\\USERS\\*", "c:/users/me", True),
        ("a?C", "AbC", True),
        ("read", "reads", False),
        # Non-ASCII letters fold too.
        ("ÉCOLE", "école", True),
        ("Ä*", "äpfel", True),
        ("Σ", "σ", True),
        ("Σ", "ς", True),
        ("ς", "σ", True),
        ("ẞ", "ß", True),
        ("\u212a", "k", True),  # KELVIN SIGN folds to k
        ("ПРИВЕТ", "привет", True),
        # Folding keeps one character per character: `?` still counts one.
        ("?", "ß", True),
        ("?", "ẞ", True),
        ("ß", "ss", False),
        ("STRASSE", "straße", False),
        ("??", "ß", False),
        ("É", "e", False),
    ],
)
def test_pattern_matches_case_insensitive(pattern: str, value: str, expected: bool) -> None:
    assert pattern_matches(pattern, value, case_sensitive=False) is expected


def test_case_insensitive_mode_is_off_by_default() -> None:
    assert pattern_matches("ÉCOLE", "école") is False
    assert pattern_matches("ÉCOLE", "école", case_sensitive=True) is False


def test_pathological_patterns_finish() -> None:
    # A backtracking regex takes exponential time on these; the matcher must not.
    many_a = "a" * 5000
    assert pattern_matches("*a*a*a*a*a*a*a*a*b", many_a) is False
    assert pattern_matches("*a*a*a*a*a*a*a*a*a", many_a) is True
    assert pattern_matches("*a" * 40 + "*b", many_a) is False
    assert pattern_matches("*?" * 40 + "*b", many_a) is False
    assert pattern_matches("*A*A*A*A*A*A*A*A*B", many_a, case_sensitive=False) is False
    assert pattern_matches("?" * 5000, many_a) is True
    assert pattern_matches("?" * 4999, many_a) is False
    ruleset = Ruleset([[rule("*a*a*a*a*a*a*a*a*b", "*a*a*a*a*a*a*a*a*b *", "deny")]])
    assert ruleset.effect(many_a, many_a) is None


# -- pattern_matches against reference implementations -----------------------


def reference_matches(pattern: str, value: str, case_sensitive: bool) -> bool:
    """The contract's wording, implemented the obvious (exponential) way."""
    pattern = pattern.replace("\\", "/")
    value = value.replace("\\", "/")
    if not case_sensitive:
        pattern, value = pattern.lower(), value.lower()

    def glob(pattern: str) -> bool:
        @cache
        def at(p: int, v: int) -> bool:
            if p == len(pattern):
                return v == len(value)
            if pattern[p] == "*":
                return any(at(p + 1, rest) for rest in range(v, len(value) + 1))
            if v == len(value):
                return False
            return (pattern[p] == "?" or pattern[p] == value[v]) and at(p + 1, v + 1)

        return at(0, 0)

    return glob(pattern) or (pattern.endswith(" *") and glob(pattern[:-2]))


def regex_matches(pattern: str, value: str) -> bool:
    """The same language by translation to a regular expression."""
    pattern = pattern.replace("\\", "/")
    value = value.replace("\\", "/")
    translated = {"*": ".*", "?": ".", " ": " "}
    parts = [translated.get(char) or re.escape(char) for char in pattern]
    source = "".join(parts)
    if source.endswith(" .*"):
        source = source[: -len(" .*")] + "(?: .*)?"
    return re.fullmatch(source, value, re.DOTALL) is not None


SMALL_ALPHABET = "aAbB*?\\/ "
small_text = st.text(alphabet=SMALL_ALPHABET, max_size=10)


@PROPERTY
@given(pattern=small_text, value=small_text, case_sensitive=st.booleans())
def test_pattern_matches_agrees_with_reference(
    pattern: str, value: str, case_sensitive: bool
) -> None:
    expected = reference_matches(pattern, value, case_sensitive)
    assert pattern_matches(pattern, value, case_sensitive=case_sensitive) is expected


@PROPERTY
@given(
    pattern=st.lists(st.sampled_from(["*", "?", " *", "\\", "/", "a", "é", "🙂", "."]), max_size=6),
    value=st.text(max_size=8),
)
def test_pattern_matches_agrees_with_regex_translation(pattern: list[str], value: str) -> None:
    joined = "".join(pattern)
    assert pattern_matches(joined, value) is regex_matches(joined, value)


@PROPERTY
@given(value=st.text(max_size=12))
def test_every_text_matches_itself_and_star(value: str) -> None:
    assert pattern_matches("*", value)
    if "*" not in value and "?" not in value:
        assert pattern_matches(value, value)
        assert pattern_matches(value, value, case_sensitive=False)


# -- rules from JSON ----------------------------------------------------------


def test_rule_from_json() -> None:
    value = {"action": "read", "resource": "/tmp/*", "effect": "allow"}
    assert PermissionRule.from_json(value) == rule("read", "/tmp/*", "allow")
    for effect in ("allow", "ask", "deny"):
        assert PermissionRule.from_json({**value, "effect": effect}).effect == effect


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "A permission rule must be an object."),
        ([], "A permission rule must be an object."),
        ("read * allow", "A permission rule must be an object."),
        (
            {"action": "a", "resource": "*", "effect": "allow", "why": "x"},
            "Permission rule has unknown member 'why'.",
        ),
        (
            {"action": "a", "resource": "*", "effect": "allow", "z": 1, "b": 2},
            "Permission rule has unknown member 'b'.",
        ),
        (
            {"action": "a", "resource": "*", "effect": "allow", "x" * 100: 1},
            f"Permission rule has unknown member '{'x' * 64}'.",
        ),
        ({"resource": "*", "effect": "allow"}, "Permission rule is missing 'action'."),
        ({"action": "a", "effect": "allow"}, "Permission rule is missing 'resource'."),
        ({"action": "a", "resource": "*"}, "Permission rule is missing 'effect'."),
        ({}, "Permission rule is missing 'action'."),
        (
            {"action": "", "resource": "*", "effect": "allow"},
            "Permission rule 'action' must be a non-empty string.",
        ),
        (
            {"action": 1, "resource": "*", "effect": "allow"},
            "Permission rule 'action' must be a non-empty string.",
        ),
        (
            {"action": None, "resource": "*", "effect": "allow"},
            "Permission rule 'action' must be a non-empty string.",
        ),
        (
            {"action": "a", "resource": "", "effect": "allow"},
            "Permission rule 'resource' must be a non-empty string.",
        ),
        (
            {"action": "a", "resource": ["*"], "effect": "allow"},
            "Permission rule 'resource' must be a non-empty string.",
        ),
        (
            {"action": "a", "resource": "*", "effect": "Allow"},
            "Permission rule 'effect' must be 'allow', 'ask' or 'deny'.",
        ),
        (
            {"action": "a", "resource": "*", "effect": ""},
            "Permission rule 'effect' must be 'allow', 'ask' or 'deny'.",
        ),
        (
            {"action": "a", "resource": "*", "effect": True},
            "Permission rule 'effect' must be 'allow', 'ask' or 'deny'.",
        ),
        (
            {"action": "a", "resource": "*", "effect": ["allow"]},
            "Permission rule 'effect' must be 'allow', 'ask' or 'deny'.",
        ),
        (
            {"action": "a", "resource": "*", "effect": None},
            "Permission rule 'effect' must be 'allow', 'ask' or 'deny'.",
        ),
    ],
)
def test_rule_from_json_rejects(value: Any, message: str) -> None:
    with pytest.raises(WorkerHostError) as caught:
        PermissionRule.from_json(value)
    assert (caught.value.code, caught.value.message) == ("invalid_rule", message)


# -- rulesets -----------------------------------------------------------------

EMPTY_RESOURCES = (
    "invalid_permissions",
    "The tool's permission projection is invalid: resources must be a non-empty list of strings.",
)


def test_no_rule_matches() -> None:
    ruleset = Ruleset([])
    assert ruleset.effect("read", "/tmp/x") is None
    assert ruleset.projection_effect("read", ["/tmp/x"]) == "ask"
    assert Ruleset([[], []]).effect("read", "x") is None
    other = Ruleset([[rule("write", "*", "allow")]])
    assert other.effect("read", "x") is None
    assert other.projection_effect("read", ["x"]) == "ask"


def test_last_matching_rule_wins_across_layers() -> None:
    host = [rule("read", "*", "allow")]
    session = [rule("read", "/etc/*", "deny")]
    agent = [rule("read", "/etc/hosts", "ask")]
    ruleset = Ruleset([host, session, agent])
    assert ruleset.effect("read", "/tmp/x") == "allow"
    assert ruleset.effect("read", "/etc/passwd") == "deny"
    assert ruleset.effect("read", "/etc/hosts") == "ask"
    assert ruleset.rules == (*host, *session, *agent)


def test_later_layers_override_earlier_denies() -> None:
    ruleset = Ruleset([[rule("shell", "*", "deny")], [rule("shell", "git status *", "allow")]])
    assert ruleset.effect("shell", "git status") == "allow"
    assert ruleset.effect("shell", "rm -rf /") == "deny"
    # The same rules in the other order: the broad deny comes last and wins.
    reversed_layers = Ruleset(
        [[rule("shell", "git status *", "allow")], [rule("shell", "*", "deny")]]
    )
    assert reversed_layers.effect("shell", "git status") == "deny"


def test_last_matching_rule_wins_within_a_layer() -> None:
    ruleset = Ruleset(
        [[rule("*", "*", "ask"), rule("read", "*", "allow"), rule("re*", "x", "deny")]]
    )
    assert ruleset.effect("read", "x") == "deny"
    assert ruleset.effect("read", "y") == "allow"
    assert ruleset.effect("write", "y") == "ask"
    assert ruleset.effect("rest", "y") == "ask"


def test_rules_match_action_and_resource_as_patterns() -> None:
    ruleset = Ruleset(
        [[rule("web?etch", "https://example.com/*", "allow"), rule("git *", "*", "deny")]]
    )
    assert ruleset.effect("webFetch", "https://example.com/a/b") == "allow"
    assert ruleset.effect("webFetch", "https://example.org/") is None
    assert ruleset.effect("git", "x") == "deny"
    assert ruleset.effect("git push", "x") == "deny"
    assert ruleset.effect("gitk", "x") is None


def test_ruleset_normalises_backslashes() -> None:
    ruleset = Ruleset([[rule("read", "C:\\work\\*", "allow")]])
    assert ruleset.effect("read", "C:/work/a.txt") == "allow"
    assert ruleset.effect("read", "C:\\work\\a.txt") == "allow"
    assert ruleset.effect("read", "D:\\work\\a.txt") is None


def test_ruleset_case_sensitivity() -> None:
    rules = [[rule("Read", "/TMP/*", "allow")]]
    assert Ruleset(rules).effect("read", "/tmp/x") is None
    assert Ruleset(rules).effect("Read", "/TMP/x") == "allow"
    assert Ruleset(rules, case_sensitive=False).effect("read", "/tmp/x") == "allow"
    assert Ruleset(rules, case_sensitive=False).effect("READ", "/Tmp/X") == "allow"


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (["/ok/a"], "allow"),
        (["/ok/a", "/ok/b"], "allow"),
        (["/ask/a"], "ask"),
        (["/elsewhere"], "ask"),
        (["/ok/a", "/ask/a"], "ask"),
        (["/ok/a", "/elsewhere"], "ask"),
        (["/no/a"], "deny"),
        (["/ok/a", "/no/a"], "deny"),
        (["/ask/a", "/no/a"], "deny"),
        (["/elsewhere", "/no/a", "/ok/a"], "deny"),
    ],
)
def test_projection_effect(resources: list[str], expected: str) -> None:
    ruleset = Ruleset(
        [
            [
                rule("read", "/ok/*", "allow"),
                rule("read", "/ask/*", "ask"),
                rule("read", "/no/*", "deny"),
            ]
        ]
    )
    assert ruleset.projection_effect("read", resources) == expected


def test_projection_effect_refuses_empty_resources() -> None:
    with pytest.raises(WorkerHostError) as caught:
        Ruleset([[rule("*", "*", "allow")]]).projection_effect("read", [])
    assert (caught.value.code, caught.value.message) == EMPTY_RESOURCES


# -- hiding tools -------------------------------------------------------------


def test_hides_tool() -> None:
    assert Ruleset([]).hides_tool("shell") is False
    assert Ruleset([[rule("shell", "*", "deny")]]).hides_tool("shell") is True
    assert Ruleset([[rule("shell", "*", "deny")]]).hides_tool("read") is False
    assert Ruleset([[rule("shell", "*", "ask")]]).hides_tool("shell") is False
    assert Ruleset([[rule("shell", "*", "allow")]]).hides_tool("shell") is False


def test_a_later_allow_for_the_action_unhides() -> None:
    deny, allow = rule("shell", "*", "deny"), rule("shell", "*", "allow")
    assert Ruleset([[deny], [allow]]).hides_tool("shell") is False
    assert Ruleset([[allow], [deny]]).hides_tool("shell") is True
    assert Ruleset([[deny, allow, deny]]).hides_tool("shell") is True
    # Any later rule for the action decides, even one for a single resource: the
    # tool can still be used for /tmp, so the model must see it.
    narrow_allow = Ruleset([[rule("shell", "*", "deny"), rule("shell", "/tmp/*", "allow")]])
    assert narrow_allow.hides_tool("shell") is False
    assert narrow_allow.effect("shell", "/tmp/x") == "allow"


def test_later_rules_for_other_actions_do_not_unhide() -> None:
    ruleset = Ruleset([[rule("shell", "*", "deny")], [rule("read", "*", "allow")]])
    assert ruleset.hides_tool("shell") is True
    assert ruleset.hides_tool("read") is False


def test_a_deny_on_specific_resources_does_not_hide() -> None:
    assert Ruleset([[rule("read", "/etc/*", "deny")]]).hides_tool("read") is False
    assert Ruleset([[rule("read", "?", "deny")]]).hides_tool("read") is False
    assert Ruleset([[rule("read", "* *", "deny")]]).hides_tool("read") is False
    # The last rule for the action is the narrow one, so the tool stays listed
    # (its calls are still denied everywhere by the earlier rule).
    ruleset = Ruleset([[rule("read", "*", "deny"), rule("read", "/etc/*", "deny")]])
    assert ruleset.hides_tool("read") is False
    assert ruleset.projection_effect("read", ["/tmp/x"]) == "deny"


def test_a_deny_on_every_resource_spelled_with_several_stars_hides() -> None:
    assert Ruleset([[rule("read", "**", "deny")]]).hides_tool("read") is True


def test_hides_tool_matches_action_patterns() -> None:
    ruleset = Ruleset([[rule("no*", "*", "deny")]])
    assert ruleset.hides_tool("notes") is True
    assert ruleset.hides_tool("no") is True
    assert ruleset.hides_tool("yes") is False
    everything = Ruleset([[rule("*", "*", "deny")], [rule("read", "*", "allow")]])
    assert everything.hides_tool("read") is False
    assert everything.hides_tool("write") is True
    assert Ruleset([[rule("web?etch", "*", "deny")]]).hides_tool("webFetch") is True


def test_hides_tool_follows_case_sensitivity() -> None:
    rules = [[rule("SHELL", "*", "deny")]]
    assert Ruleset(rules).hides_tool("shell") is False
    assert Ruleset(rules, case_sensitive=False).hides_tool("shell") is True


# -- resolving projections ------------------------------------------------------

ALLOW_CONFIG = Resolution(effect="allow", source="config")
DENY_CONFIG = Resolution(effect="deny", source="config")
ALLOW_SAVED = Resolution(effect="allow", source="saved")
ALLOW_HOOK = Resolution(effect="allow", source="hook")
DENY_HOOK = Resolution(effect="deny", source="hook")
ASK = Resolution(effect="ask", source=None)

DEPLOY_RULES = Ruleset(
    [
        [rule("deploy", "dev", "allow"), rule("deploy", "prod", "deny")],
        [rule("deploy", "staging", "ask")],
    ]
)
SAVED_ALL = [SavedPermission(action="deploy", pattern="*")]


@pytest.mark.parametrize(
    ("resources", "saved", "hook", "expected"),
    [
        # A configured deny refuses, before hooks and saved permissions.
        (["prod"], [], None, DENY_CONFIG),
        (["prod"], [], "allow", DENY_CONFIG),
        (["prod"], [], "deny", DENY_CONFIG),
        (["prod"], SAVED_ALL, "allow", DENY_CONFIG),
        (["dev", "prod"], SAVED_ALL, "allow", DENY_CONFIG),
        # A hook deny refuses even what the configuration or the Session allows.
        (["dev"], [], "deny", DENY_HOOK),
        (["other"], [], "deny", DENY_HOOK),
        (["other"], SAVED_ALL, "deny", DENY_HOOK),
        # A configured allow approves.
        (["dev"], [], None, ALLOW_CONFIG),
        (["dev"], [], "allow", ALLOW_CONFIG),
        (["dev"], SAVED_ALL, None, ALLOW_CONFIG),
        # Saved permissions approve what would ask, configured `ask` included.
        (["other"], SAVED_ALL, None, ALLOW_SAVED),
        (["staging"], SAVED_ALL, None, ALLOW_SAVED),
        (["other"], SAVED_ALL, "allow", ALLOW_SAVED),
        # ... together with configured allows for the other resources.
        (["dev", "other"], SAVED_ALL, None, ALLOW_SAVED),
        # A hook allow approves what is left.
        (["other"], [], "allow", ALLOW_HOOK),
        (["staging"], [], "allow", ALLOW_HOOK),
        (["dev", "other"], [], "allow", ALLOW_HOOK),
        # Anything else asks.
        (["other"], [], None, ASK),
        (["staging"], [], None, ASK),
        (["dev", "other"], [], None, ASK),
    ],
)
def test_resolve_projection(
    resources: list[str], saved: list[SavedPermission], hook: Any, expected: Resolution
) -> None:
    assert resolve_projection(DEPLOY_RULES, saved, "deploy", resources, hook) == expected


def test_saved_patterns_must_cover_every_resource() -> None:
    saved = [SavedPermission("read", "/src/*"), SavedPermission("read", "/docs/*")]
    ruleset = Ruleset([])
    assert resolve_projection(ruleset, saved, "read", ["/src/a", "/docs/b"], None) == ALLOW_SAVED
    assert resolve_projection(ruleset, saved, "read", ["/src/a", "/etc/x"], None) == ASK
    assert resolve_projection(ruleset, saved, "read", ["/src/a", "/etc/x"], "allow") == ALLOW_HOOK


def test_saved_permissions_are_per_action() -> None:
    ruleset = Ruleset([])
    saved = [SavedPermission("write", "*")]
    assert resolve_projection(ruleset, saved, "read", ["x"], None) == ASK
    # The saved action is literal: a plugin projecting action `*` cannot save a
    # grant for every action.
    wild = saved_from_reply("*", ["*"])
    assert resolve_projection(ruleset, wild, "read", ["x"], None) == ASK
    assert resolve_projection(ruleset, wild, "*", ["x"], None) == ALLOW_SAVED


def test_saved_patterns_use_the_pattern_language() -> None:
    ruleset = Ruleset([])
    saved = saved_from_reply("shell", ["git status *", "C:\\work\\*"])
    assert resolve_projection(ruleset, saved, "shell", ["git status"], None) == ALLOW_SAVED
    assert resolve_projection(ruleset, saved, "shell", ["git status -s"], None) == ALLOW_SAVED
    assert resolve_projection(ruleset, saved, "shell", ["C:/work/x"], None) == ALLOW_SAVED
    assert resolve_projection(ruleset, saved, "shell", ["git push"], None) == ASK


def test_saved_permissions_follow_the_ruleset_case_mode() -> None:
    saved = saved_from_reply("Read", ["/SRC/*"])
    assert resolve_projection(Ruleset([]), saved, "read", ["/src/a"], None) == ASK
    insensitive = Ruleset([], case_sensitive=False)
    assert resolve_projection(insensitive, saved, "read", ["/src/a"], None) == ALLOW_SAVED


def test_saved_never_overrides_a_configured_deny_from_any_layer() -> None:
    ruleset = Ruleset([[rule("*", "*", "allow")], [], [rule("read", "/secret/*", "deny")]])
    saved = saved_from_reply("read", ["*"])
    assert resolve_projection(ruleset, saved, "read", ["/secret/k"], "allow") == DENY_CONFIG
    assert resolve_projection(ruleset, saved, "read", ["/public/k"], None) == ALLOW_CONFIG


def test_resolve_projection_refuses_empty_resources() -> None:
    with pytest.raises(WorkerHostError) as caught:
        resolve_projection(Ruleset([]), SAVED_ALL, "deploy", [], "allow")
    assert (caught.value.code, caught.value.message) == EMPTY_RESOURCES


# -- saving from replies --------------------------------------------------------


def test_saved_from_reply() -> None:
    assert saved_from_reply("deploy", []) == []
    assert saved_from_reply("deploy", ["prod"]) == [SavedPermission("deploy", "prod")]
    assert saved_from_reply("read", ["/a/*", "/b/*", "/a/*"]) == [
        SavedPermission("read", "/a/*"),
        SavedPermission("read", "/b/*"),
    ]


def test_an_always_reply_without_save_patterns_acts_like_once() -> None:
    saved = saved_from_reply("deploy", [])
    assert resolve_projection(Ruleset([]), saved, "deploy", ["prod"], None) == ASK
