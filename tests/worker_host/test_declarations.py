"""Skill and agent declarations: every contract rule accepted once and rejected once.

The values are what the guest prelude records for `context.skills.register`
and `context.agents.register`: plain-JSON copies of the declarations. Each
rejection asserts the exact code and one-line message a plugin author sees.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from worker_host import WorkerHostError
from worker_host._declarations import (
    MAX_AGENT_DESCRIPTION_LENGTH,
    MAX_AGENT_DISPLAY_NAME_LENGTH,
    MAX_AGENT_ID_LENGTH,
    MAX_MODEL_ID_LENGTH,
    MAX_PROVIDER_ID_LENGTH,
    MAX_SAFE_INTEGER,
    MAX_SKILL_ID_LENGTH,
    Agent,
    AgentPermissionRule,
    AgentToolSelection,
    GenerationSettings,
    ModelInstruction,
    ModelToolChoice,
    Skill,
    SkillAdvertisement,
    SkillMetadata,
    check_default_agent,
    fallback_default,
    load_skill_body,
    validate_agent,
    validate_agents,
    validate_skill,
    validate_skills,
)

CODE = "invalid_contribution"
DELETE = object()

# The contract's example, "A bundle plugin for the Worker host" (`note-style`).
NOTE_STYLE: dict[str, Any] = {
    "id": "note-style",
    "displayName": "Note style",
    "description": "House style for notes saved with notes_save.",
    "version": "1.0.0",
    "body": "\n".join(
        [
            "# Note style",
            "",
            "- Titles are short noun phrases in sentence case.",
            "- Start the body with a one-line summary, then bullet points.",
        ]
    ),
    "modelAdvertisement": {"advertised": True, "userInvocable": True},
    "publicMetadata": {"tags": ["notes"]},
}

REVIEWER: dict[str, Any] = {"id": "review", "displayName": "Reviewer", "description": "Reviews."}

IDENTIFIER_RULE = (
    "must be a lowercase letter followed by lowercase letters and digits joined by single "
    "'.', '_' or '-' characters"
)
AGENT_ID_RULE = (
    "must be '/'-separated segments, each a lowercase letter followed by lowercase letters "
    "and digits joined by single '.', '_' or '-' characters"
)
MODEL_RULE = (
    "must be a 'provider/model' catalog reference: a lowercase provider id, '/', then "
    "'/'-separated model id segments of letters, digits and '._:-', each starting with a "
    "letter or digit"
)
HTTPS = "must be a canonical https:// URL"
HTTPS_PATH = f"{HTTPS} with a path of at least '/' that nothing would rewrite"
HTTPS_HOST = f"{HTTPS} with a lowercase host name or IP address"
HTTPS_PORT = f"{HTTPS} with no port, or a port other than 443 without leading zeros"


def changed(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `base` with the dotted `path` set to `value` (or removed for DELETE)."""
    result = copy.deepcopy(base)
    *parents, last = path.split(".")
    target = result
    for key in parents:
        target = target.setdefault(key, {})
    if value is DELETE:
        target.pop(last, None)
    else:
        target[last] = value
    return result


def skill_failure(value: Any) -> tuple[str, str]:
    with pytest.raises(WorkerHostError) as caught:
        validate_skill(value)
    return caught.value.code, caught.value.message


def agent_failure(value: Any) -> tuple[str, str]:
    with pytest.raises(WorkerHostError) as caught:
        validate_agent(value)
    return caught.value.code, caught.value.message


def skill_rule(field: str, rule: str) -> tuple[str, str]:
    return CODE, f"Skill 'note-style': {field} {rule}."


def agent_rule(field: str, rule: str) -> tuple[str, str]:
    return CODE, f"Agent 'review': {field} {rule}."


# ---- the contract's example ---------------------------------------------------------


def test_the_contract_notes_example_skill_is_accepted() -> None:
    skill = validate_skill(NOTE_STYLE)
    assert skill == Skill(
        id="note-style",
        display_name="Note style",
        description="House style for notes saved with notes_save.",
        body=NOTE_STYLE["body"],
        version="1.0.0",
        model_advertisement=SkillAdvertisement(advertised=True, user_invocable=True),
        public_metadata=SkillMetadata(tags=("notes",)),
        files=(),
    )
    assert skill.to_json() == {**NOTE_STYLE, "files": []}


# ---- skills: accepted values, normalised ------------------------------------------

SKILL_ACCEPTS = [
    pytest.param("id", "a" * MAX_SKILL_ID_LENGTH, "id", "a" * 128, id="id-128-characters"),
    pytest.param("id", "a1.b_c-d9", "id", "a1.b_c-d9", id="id-separators"),
    pytest.param(
        "displayName", "  Cafe\u0301 notes\t\n", "display_name", "Café notes", id="display-nfc-trim"
    ),
    pytest.param(
        "displayName", "\ufeff\u3000Notes\u00a0", "display_name", "Notes", id="display-js-trim"
    ),
    pytest.param(
        "description", " Use for notes\u2003", "description", "Use for notes", id="description-trim"
    ),
    pytest.param(
        "description", "Re\u0301sume\u0301 notes", "description", "Résumé notes", id="desc-nfc"
    ),
    pytest.param("body", "\tx\n\n  y  \n", "body", "\tx\n\n  y  \n", id="body-kept-exactly"),
    pytest.param("body", "Résumé", "body", "Résumé", id="body-nfc"),
    pytest.param("version", "1.0.0", "version", "1.0.0", id="version-semver"),
    pytest.param(
        "version", "v2_beta+build:7-rc.1", "version", "v2_beta+build:7-rc.1", id="ver-all"
    ),
    pytest.param("version", "7", "version", "7", id="version-digit"),
    pytest.param(
        "modelAdvertisement",
        {"advertised": False, "userInvocable": False},
        "model_advertisement",
        SkillAdvertisement(False, False),
        id="advertisement-false",
    ),
    pytest.param(
        "publicMetadata",
        {
            "author": "  Ada Lovelace\u0301 ",
            "license": "MIT OR (GPL-3.0+)",
            "homepage": "https://example.com/notes",
            "tags": ["computer-use", "notes", "a.b_c"],
        },
        "public_metadata",
        SkillMetadata(
            tags=("computer-use", "notes", "a.b_c"),
            author="Ada Lovelacé",
            license="MIT OR (GPL-3.0+)",
            homepage="https://example.com/notes",
        ),
        id="metadata-full",
    ),
    pytest.param(
        "publicMetadata", {"tags": []}, "public_metadata", SkillMetadata(), id="tags-may-be-empty"
    ),
    pytest.param(
        "publicMetadata",
        {"author": "", "tags": []},
        "public_metadata",
        SkillMetadata(author=""),
        id="author-may-be-empty",
    ),
    pytest.param(
        "files",
        ["scripts/run.sh", "a.md", "docs/.config/x_y-z.txt", "..a/b.."],
        "files",
        ("..a/b..", "a.md", "docs/.config/x_y-z.txt", "scripts/run.sh"),
        id="files-lexical",
    ),
    pytest.param("files", [], "files", (), id="files-empty"),
    pytest.param("files", DELETE, "files", (), id="files-absent"),
    pytest.param("extra", {"anything": 1}, "id", "note-style", id="unknown-member-ignored"),
]


@pytest.mark.parametrize(("path", "value", "attribute", "expected"), SKILL_ACCEPTS)
def test_skill_accepts_and_normalises(path: str, value: Any, attribute: str, expected: Any) -> None:
    skill = validate_skill(changed(NOTE_STYLE, path, value))
    assert getattr(skill, attribute) == expected
    assert validate_skill(skill.to_json()) == skill


HOMEPAGES_ACCEPTED = [
    "https://example.com/",
    "https://example.com/a/b/",
    "https://docs.example.com:8443/notes/%20x",
    "https://1.2.3.4/",
    "https://[::1]/",
    "https://[1:0:2:3:4:5:6:7]:1/",
    "https://my_host.example/~a/(b);c=d@e:f|g",
    "https://xn--nxasmq6b.com/",
    "https://example.com./",
]


@pytest.mark.parametrize("homepage", HOMEPAGES_ACCEPTED)
def test_skill_accepts_canonical_https_homepages(homepage: str) -> None:
    skill = validate_skill(changed(NOTE_STYLE, "publicMetadata.homepage", homepage))
    assert skill.public_metadata.homepage == homepage


# ---- skills: rejected values --------------------------------------------------------

SKILL_REJECTS = [
    # id
    pytest.param("id", DELETE, (CODE, "Skill declaration: id is required."), id="id-missing"),
    pytest.param("id", 7, (CODE, "Skill declaration: id must be a string."), id="id-number"),
    pytest.param(
        "id",
        "a" * (MAX_SKILL_ID_LENGTH + 1),
        (CODE, "Skill declaration: id must be at most 128 characters."),
        id="id-too-long",
    ),
    *[
        pytest.param("id", bad, (CODE, f"Skill declaration: id {IDENTIFIER_RULE}."), id=f"id-{i}")
        for i, bad in enumerate(["", "Note", "1note", "a..b", "a-", "-a", "a/b", "a b", "é", "a\n"])
    ],
    # displayName
    pytest.param(
        "displayName", DELETE, skill_rule("displayName", "is required"), id="display-missing"
    ),
    pytest.param("displayName", None, skill_rule("displayName", "must be a string"), id="dn-null"),
    pytest.param(
        "displayName", " \t\u3000", skill_rule("displayName", "must not be empty"), id="dn-blank"
    ),
    pytest.param(
        "displayName",
        "Note\nstyle",
        skill_rule("displayName", "must not contain control characters"),
        id="display-newline",
    ),
    pytest.param(
        "displayName",
        "Note\x7fstyle",
        skill_rule("displayName", "must not contain control characters"),
        id="display-del",
    ),
    pytest.param(
        "displayName",
        "\x1cNote",
        skill_rule("displayName", "must not contain control characters"),
        id="display-not-js-whitespace",
    ),
    # description
    pytest.param("description", DELETE, skill_rule("description", "is required"), id="desc-gone"),
    pytest.param("description", 1, skill_rule("description", "must be a string"), id="desc-num"),
    pytest.param("description", "  ", skill_rule("description", "must not be empty"), id="d-blank"),
    pytest.param(
        "description", "a\nb", skill_rule("description", "must be a single line"), id="desc-lf"
    ),
    pytest.param(
        "description", "a\u2028b", skill_rule("description", "must be a single line"), id="d-ls"
    ),
    pytest.param(
        "description",
        "a\x07b",
        skill_rule("description", "must not contain control characters"),
        id="desc-bell",
    ),
    # body
    pytest.param("body", DELETE, skill_rule("body", "is required"), id="body-missing"),
    pytest.param("body", ["x"], skill_rule("body", "must be a string"), id="body-array"),
    pytest.param(
        "body", "", skill_rule("body", "must contain non-whitespace text"), id="body-empty"
    ),
    pytest.param(
        "body",
        " \n\t\u3000\ufeff",
        skill_rule("body", "must contain non-whitespace text"),
        id="body-whitespace",
    ),
    pytest.param(
        "body", "Re\u0301sume\u0301", skill_rule("body", "must be NFC-normalized"), id="body-nfd"
    ),
    pytest.param(
        "body", "a\r\nb", skill_rule("body", "must not contain carriage returns"), id="body-cr"
    ),
    pytest.param(
        "body",
        "a\x00b",
        skill_rule("body", "must not contain control characters other than tab and newline"),
        id="body-nul",
    ),
    pytest.param(
        "body",
        "a\x85b",
        skill_rule("body", "must not contain control characters other than tab and newline"),
        id="body-c1",
    ),
    # version
    pytest.param("version", DELETE, skill_rule("version", "is required"), id="version-missing"),
    pytest.param("version", 1, skill_rule("version", "must be a string"), id="version-number"),
    *[
        pytest.param(
            "version",
            bad,
            skill_rule(
                "version",
                "must start with a letter or digit and use only letters, digits and '._+:-'",
            ),
            id=f"version-{i}",
        )
        for i, bad in enumerate(["", ".1", "-1", "1 0", "1/0", "é1", "1.0\n"])
    ],
    # modelAdvertisement
    pytest.param(
        "modelAdvertisement",
        DELETE,
        skill_rule("modelAdvertisement", "is required"),
        id="advertisement-missing",
    ),
    pytest.param(
        "modelAdvertisement",
        [True, True],
        skill_rule("modelAdvertisement", "must be a JSON object"),
        id="advertisement-array",
    ),
    pytest.param(
        "modelAdvertisement.advertised",
        DELETE,
        skill_rule("modelAdvertisement.advertised", "is required"),
        id="advertised-missing",
    ),
    pytest.param(
        "modelAdvertisement.advertised",
        "true",
        skill_rule("modelAdvertisement.advertised", "must be true or false"),
        id="advertised-string",
    ),
    pytest.param(
        "modelAdvertisement.userInvocable",
        DELETE,
        skill_rule("modelAdvertisement.userInvocable", "is required"),
        id="invocable-missing",
    ),
    pytest.param(
        "modelAdvertisement.userInvocable",
        1,
        skill_rule("modelAdvertisement.userInvocable", "must be true or false"),
        id="invocable-number",
    ),
    # publicMetadata
    pytest.param(
        "publicMetadata", DELETE, skill_rule("publicMetadata", "is required"), id="meta-missing"
    ),
    pytest.param(
        "publicMetadata",
        None,
        skill_rule("publicMetadata", "must be a JSON object"),
        id="meta-null",
    ),
    pytest.param(
        "publicMetadata.author",
        42,
        skill_rule("publicMetadata.author", "must be a string"),
        id="author-number",
    ),
    pytest.param(
        "publicMetadata.author",
        "Ada\tLovelace",
        skill_rule("publicMetadata.author", "must not contain control characters"),
        id="author-tab",
    ),
    pytest.param(
        "publicMetadata.license",
        None,
        skill_rule("publicMetadata.license", "must be a string"),
        id="license-null",
    ),
    *[
        pytest.param(
            "publicMetadata.license",
            bad,
            skill_rule(
                "publicMetadata.license",
                "must be non-empty and use only letters, digits, spaces and '.()+-'",
            ),
            id=f"license-{i}",
        )
        for i, bad in enumerate(["", "MIT/X11", "BSD, 3-clause", "MIT\n", "Licença"])
    ],
    pytest.param(
        "publicMetadata.homepage",
        ["https://example.com/"],
        skill_rule("publicMetadata.homepage", "must be a string"),
        id="homepage-array",
    ),
    pytest.param(
        "publicMetadata.tags", DELETE, skill_rule("publicMetadata.tags", "is required"), id="tags-0"
    ),
    pytest.param(
        "publicMetadata.tags",
        "notes",
        skill_rule("publicMetadata.tags", "must be an array"),
        id="tags-string",
    ),
    pytest.param(
        "publicMetadata.tags",
        ["notes", 1],
        skill_rule("publicMetadata.tags[1]", "must be a string"),
        id="tag-number",
    ),
    pytest.param(
        "publicMetadata.tags",
        ["Computer-Use"],
        skill_rule("publicMetadata.tags[0]", IDENTIFIER_RULE),
        id="tag-uppercase",
    ),
    pytest.param(
        "publicMetadata.tags",
        ["computer--use"],
        skill_rule("publicMetadata.tags[0]", IDENTIFIER_RULE),
        id="tag-double-separator",
    ),
    pytest.param(
        "publicMetadata.tags",
        ["notes", "style", "notes"],
        skill_rule("publicMetadata.tags[2]", "repeats an earlier entry"),
        id="tag-duplicate",
    ),
    # files
    pytest.param("files", None, skill_rule("files", "must be an array"), id="files-null"),
    pytest.param("files", "a.md", skill_rule("files", "must be an array"), id="files-string"),
    pytest.param("files", [1], skill_rule("files[0]", "must be a string"), id="file-number"),
    *[
        pytest.param(
            "files",
            ["ok.md", bad],
            skill_rule(
                "files[1]",
                "must be a lowercase relative path of letters, digits, '.', '_', '-' and '/'",
            ),
            id=f"file-chars-{i}",
        )
        for i, bad in enumerate(["", "A.md", "a b.md", "a\\b.md", "ré.md", "a:b", "a\n"])
    ],
    *[
        pytest.param(
            "files",
            [bad],
            skill_rule("files[0]", "must be a relative path without empty segments"),
            id=f"file-empty-segment-{i}",
        )
        for i, bad in enumerate(["/abs.md", "a//b.md", "dir/"])
    ],
    *[
        pytest.param(
            "files",
            [bad],
            skill_rule("files[0]", "must not contain '.' or '..' segments"),
            id=f"file-dot-segment-{i}",
        )
        for i, bad in enumerate([".", "..", "./a.md", "a/../b.md", "a/.", "../a"])
    ],
    pytest.param(
        "files",
        ["a.md", "b.md", "a.md"],
        skill_rule("files[2]", "repeats an earlier file"),
        id="file-duplicate",
    ),
]


@pytest.mark.parametrize(("path", "value", "expected"), SKILL_REJECTS)
def test_skill_rejects(path: str, value: Any, expected: tuple[str, str]) -> None:
    assert skill_failure(changed(NOTE_STYLE, path, value)) == expected


HOMEPAGES_REJECTED = [
    ("http://example.com/", f"{HTTPS} (it must start with 'https://')"),
    ("HTTPS://example.com/", f"{HTTPS} (it must start with 'https://')"),
    ("https:/example.com/", f"{HTTPS} (it must start with 'https://')"),
    ("example.com", f"{HTTPS} (it must start with 'https://')"),
    ("https://user@example.com/", f"{HTTPS} without credentials"),
    ("https://user:secret@example.com/", f"{HTTPS} without credentials"),
    ("https://example.com/?", f"{HTTPS} without a query"),
    ("https://example.com/a?b=1", f"{HTTPS} without a query"),
    ("https://example.com/#top", f"{HTTPS} without a fragment"),
    ("https://example.com", HTTPS_PATH),
    ("https://example.com/a/../b", HTTPS_PATH),
    ("https://example.com/a/./b", HTTPS_PATH),
    ("https://example.com/a/%2E%2e/b", HTTPS_PATH),
    ("https://example.com/a b", HTTPS_PATH),
    ("https://example.com/a\\b", HTTPS_PATH),
    ("https://example.com/é", HTTPS_PATH),
    ("https://example.com/{x}", HTTPS_PATH),
    ("https://example.com/a^b", HTTPS_PATH),
    ("https://Example.com/", HTTPS_HOST),
    ("https:///", HTTPS_HOST),
    ("https://café.com/", HTTPS_HOST),
    ("https://exa%6dple.com/", HTTPS_HOST),
    ("https://a..b/", HTTPS_HOST),
    ("https://01.2.3.4/", HTTPS_HOST),
    ("https://1.2.3/", HTTPS_HOST),
    ("https://256.0.0.1/", HTTPS_HOST),
    ("https://0x7f.0.0.1/", HTTPS_HOST),
    ("https://1.2.3.4./", HTTPS_HOST),
    ("https://a.1/", HTTPS_HOST),
    ("https://[0:0:0:0:0:0:0:1]/", HTTPS_HOST),
    ("https://[FE80::1]/", HTTPS_HOST),
    ("https://[::ffff:1.2.3.4]/", HTTPS_HOST),
    ("https://[1:0:0:2:0:0:0:3]/", HTTPS_HOST),
    ("https://xn--zz.com/", HTTPS_HOST),
    ("https://xn--a.com/", HTTPS_HOST),
    ("https://xn--nxasmq6bbz.com/", HTTPS_HOST),
    ("https://example.com:443/", HTTPS_PORT),
    ("https://example.com:/", HTTPS_PORT),
    ("https://example.com:08443/", HTTPS_PORT),
    ("https://example.com:65536/", HTTPS_PORT),
    ("https://[::1]x/", HTTPS_PORT),
]


@pytest.mark.parametrize(("homepage", "rule"), HOMEPAGES_REJECTED)
def test_skill_rejects_non_canonical_homepages(homepage: str, rule: str) -> None:
    value = changed(NOTE_STYLE, "publicMetadata.homepage", homepage)
    assert skill_failure(value) == skill_rule("publicMetadata.homepage", rule)


@pytest.mark.parametrize("value", [None, [], "note-style", 1])
def test_a_skill_declaration_must_be_an_object(value: Any) -> None:
    assert skill_failure(value) == (CODE, "Skill declaration must be a JSON object.")


def test_skill_ids_are_unique_among_registrations() -> None:
    other = changed(NOTE_STYLE, "id", "other")
    assert [skill.id for skill in validate_skills([NOTE_STYLE, other])] == ["note-style", "other"]
    with pytest.raises(WorkerHostError) as caught:
        validate_skills([NOTE_STYLE, other, NOTE_STYLE])
    assert (caught.value.code, caught.value.message) == (
        CODE,
        "Skill 'note-style': id is registered more than once.",
    )


# ---- skills: canonical JSON and the skill tool -------------------------------------


def test_skill_to_json_is_canonical_and_round_trips() -> None:
    declared = {
        "id": "note-style",
        "displayName": " Note style ",
        "description": "House style.\t",
        "body": "# Note style\n",
        "version": "2.0.0",
        "modelAdvertisement": {"advertised": False, "userInvocable": True, "extra": 1},
        "publicMetadata": {
            "tags": ["notes"],
            "homepage": "https://example.com/",
            "license": "MIT",
            "author": "Ada",
        },
        "files": ["z.md", "a/b.md"],
        "unknown": True,
    }
    canonical = {
        "id": "note-style",
        "displayName": "Note style",
        "description": "House style.",
        "body": "# Note style\n",
        "version": "2.0.0",
        "modelAdvertisement": {"advertised": False, "userInvocable": True},
        "publicMetadata": {
            "author": "Ada",
            "license": "MIT",
            "homepage": "https://example.com/",
            "tags": ["notes"],
        },
        "files": ["a/b.md", "z.md"],
    }
    skill = validate_skill(declared)
    assert skill.to_json() == canonical
    assert validate_skill(skill.to_json()) == skill
    assert validate_skill(json.loads(json.dumps(skill.to_json()))).to_json() == canonical


def test_the_skill_tool_returns_the_body_when_there_is_nothing_else_to_report() -> None:
    assert load_skill_body(validate_skill(NOTE_STYLE)) == NOTE_STYLE["body"]


def test_the_skill_tool_reports_base_location_and_omitted_files_but_not_the_version() -> None:
    skill = validate_skill(changed(NOTE_STYLE, "files", ["b.md", "a.md"]))
    text = load_skill_body(skill, plugin_id="example.notes")
    assert text == (
        "Base location: ze-plugin:example.notes\n\n"
        + NOTE_STYLE["body"]
        + "\n\n2 supporting files omitted: a plugin-registered Skill has no location an "
        "ordinary Tool can read."
    )
    assert "1.0.0" not in text
    one = validate_skill(changed(NOTE_STYLE, "files", ["a.md"]))
    assert load_skill_body(one).endswith(
        "\n\n1 supporting file omitted: a plugin-registered "
        "Skill has no location an ordinary Tool can read."
    )


# ---- agents: accepted values, normalised ------------------------------------------


def test_a_minimal_agent_takes_the_contract_defaults() -> None:
    agent = validate_agent(REVIEWER)
    assert agent == Agent(id="review", display_name="Reviewer", description="Reviews.")
    assert agent.tools == AgentToolSelection("all")
    assert agent.tool_choice == ModelToolChoice("auto")
    assert agent.settings == GenerationSettings()
    assert (agent.mode, agent.fallback_default, agent.model) == ("all", False, None)
    assert agent.to_json() == {
        "id": "review",
        "displayName": "Reviewer",
        "description": "Reviews.",
        "instructions": [],
        "tools": {"mode": "all"},
        "toolChoice": {"mode": "auto"},
        "settings": {},
        "permissions": [],
        "mode": "all",
        "fallbackDefault": False,
    }


AGENT_ACCEPTS = [
    pytest.param("id", "team/review-docs", "id", "team/review-docs", id="id-segments"),
    pytest.param("id", "a" * MAX_AGENT_ID_LENGTH, "id", "a" * 128, id="id-128"),
    pytest.param(
        "id", "/".join(["ab"] * 43), "id", "/".join(["ab"] * 43), id="id-128-with-slashes"
    ),
    pytest.param(
        "displayName", "\u3000Re\u0301view\t", "display_name", "Réview", id="display-nfc-trim"
    ),
    pytest.param(
        "displayName",
        "  " + "x" * MAX_AGENT_DISPLAY_NAME_LENGTH + "\n",
        "display_name",
        "x" * 256,
        id="display-256-after-trim",
    ),
    pytest.param(
        "displayName", "e\u0301" * 256, "display_name", "é" * 256, id="display-256-after-nfc"
    ),
    # The contract gives agent text no "non-empty" or control-character rule.
    pytest.param("displayName", "   ", "display_name", "", id="display-may-be-blank"),
    pytest.param("displayName", "Re\tview", "display_name", "Re\tview", id="display-inner-tab"),
    pytest.param(
        "description",
        " " + "d" * MAX_AGENT_DESCRIPTION_LENGTH + " ",
        "description",
        "d" * 1024,
        id="description-1024",
    ),
    pytest.param("description", "", "description", "", id="description-may-be-empty"),
    pytest.param(
        "instructions",
        [{"role": "system", "text": "Be brief."}, {"role": "developer", "text": " "}],
        "instructions",
        (ModelInstruction("system", "Be brief."), ModelInstruction("developer", " ")),
        id="instructions",
    ),
    pytest.param("instructions", [], "instructions", (), id="instructions-empty"),
    pytest.param("model", "openai/gpt-4.1", "model", "openai/gpt-4.1", id="model"),
    pytest.param(
        "model",
        "example.co/Org/Model_v1:latest",
        "model",
        "example.co/Org/Model_v1:latest",
        id="m2",
    ),
    pytest.param(
        "model",
        "p" * MAX_PROVIDER_ID_LENGTH + "/" + "M" * MAX_MODEL_ID_LENGTH,
        "model",
        "p" * 128 + "/" + "M" * 512,
        id="model-limits",
    ),
    pytest.param("tools", {"mode": "none"}, "tools", AgentToolSelection("none"), id="tools-none"),
    pytest.param(
        "tools", {"mode": "all", "names": [1]}, "tools", AgentToolSelection("all"), id="tools-all"
    ),
    pytest.param(
        "tools",
        {"mode": "include", "names": ["read", "skill", "task"]},
        "tools",
        AgentToolSelection("include", ("read", "skill", "task")),
        id="tools-include",
    ),
    pytest.param(
        "tools",
        {"mode": "include", "names": ["read"], "optionalNames": ["notes_save", "web.fetch"]},
        "tools",
        AgentToolSelection("include", ("read",), ("notes_save", "web.fetch")),
        id="tools-optional",
    ),
    pytest.param(
        "tools",
        {"mode": "include", "names": ["read"], "optionalNames": []},
        "tools",
        AgentToolSelection("include", ("read",)),
        id="tools-optional-empty",
    ),
    *[
        pytest.param(
            "toolChoice", {"mode": mode}, "tool_choice", ModelToolChoice(mode), id=f"choice-{mode}"
        )
        for mode in ("auto", "none", "required")
    ],
    pytest.param(
        "toolChoice",
        {"mode": "tool", "name": "notes_save"},
        "tool_choice",
        ModelToolChoice("tool", "notes_save"),
        id="choice-tool",
    ),
    pytest.param(
        "settings",
        {
            "temperature": 0,
            "topP": 1,
            "maxOutputUnits": 4096.0,
            "stopSequences": ["\n\n", "END"],
            "seed": -MAX_SAFE_INTEGER,
            "reasoningEffort": "xhigh",
        },
        "settings",
        GenerationSettings(0, 1, 4096, ("\n\n", "END"), -(2**53 - 1), "xhigh"),
        id="settings-all",
    ),
    pytest.param(
        "settings",
        {"temperature": 1.5, "topP": 0.0, "maxOutputUnits": 1, "seed": MAX_SAFE_INTEGER},
        "settings",
        GenerationSettings(temperature=1.5, top_p=0, max_output_units=1, seed=2**53 - 1),
        id="settings-bounds",
    ),
    *[
        pytest.param(
            "settings",
            {"reasoningEffort": effort},
            "settings",
            GenerationSettings(reasoning_effort=effort),
            id=f"effort-{effort}",
        )
        for effort in ("none", "minimal", "low", "medium", "high", "xhigh", "max")
    ],
    pytest.param("settings", {}, "settings", GenerationSettings(), id="settings-empty"),
    pytest.param(
        "permissions",
        [
            {"action": "task", "resource": "*", "effect": "allow"},
            {"action": "bash", "resource": "git status *", "effect": "ask"},
            {"action": "", "resource": "", "effect": "deny"},
        ],
        "permissions",
        (
            AgentPermissionRule("task", "*", "allow"),
            AgentPermissionRule("bash", "git status *", "ask"),
            AgentPermissionRule("", "", "deny"),
        ),
        id="permissions",
    ),
    *[pytest.param("mode", mode, "mode", mode, id=f"mode-{mode}") for mode in ("primary", "all")],
    pytest.param("mode", "subagent", "mode", "subagent", id="mode-subagent"),
    pytest.param("fallbackDefault", True, "fallback_default", True, id="fallback-true"),
    pytest.param("fallbackDefault", False, "fallback_default", False, id="fallback-false"),
    pytest.param("extra", [1, 2], "id", "review", id="unknown-member-ignored"),
]


@pytest.mark.parametrize(("path", "value", "attribute", "expected"), AGENT_ACCEPTS)
def test_agent_accepts_and_normalises(path: str, value: Any, attribute: str, expected: Any) -> None:
    agent = validate_agent(changed(REVIEWER, path, value))
    assert getattr(agent, attribute) == expected
    assert validate_agent(agent.to_json()) == agent


def test_integral_numbers_become_integers_like_javascript_numbers() -> None:
    agent = validate_agent(
        changed(REVIEWER, "settings", {"temperature": 1.0, "maxOutputUnits": 8.0, "seed": 3.0})
    )
    settings = agent.to_json()["settings"]
    assert (
        json.dumps(settings, sort_keys=True) == '{"maxOutputUnits": 8, "seed": 3, "temperature": 1}'
    )


# ---- agents: rejected values --------------------------------------------------------

AGENT_REJECTS = [
    # id
    pytest.param("id", DELETE, (CODE, "Agent declaration: id is required."), id="id-missing"),
    pytest.param("id", ["review"], (CODE, "Agent declaration: id must be a string."), id="id-list"),
    pytest.param(
        "id",
        "a" * (MAX_AGENT_ID_LENGTH + 1),
        (CODE, "Agent declaration: id must be at most 128 characters."),
        id="id-too-long",
    ),
    pytest.param(
        "id",
        "/".join(["ab"] * 43) + "c",
        (CODE, "Agent declaration: id must be at most 128 characters."),
        id="id-too-long-with-slashes",
    ),
    *[
        pytest.param("id", bad, (CODE, f"Agent declaration: id {AGENT_ID_RULE}."), id=f"id-{i}")
        for i, bad in enumerate(
            ["", "Review", "/review", "review/", "team//review", "team/1x", "a__b", "a.", "ré"]
        )
    ],
    # displayName
    pytest.param(
        "displayName", DELETE, agent_rule("displayName", "is required"), id="display-missing"
    ),
    pytest.param("displayName", 3, agent_rule("displayName", "must be a string"), id="dn-number"),
    *[
        pytest.param(
            "displayName", bad, agent_rule("displayName", "must be a single line"), id=f"dn-lb-{i}"
        )
        for i, bad in enumerate(["a\nb", "a\rb", "a\u2028b", "a\u2029b", "a\x85b", "a\vb", "a\fb"])
    ],
    pytest.param(
        "displayName",
        "x" * (MAX_AGENT_DISPLAY_NAME_LENGTH + 1),
        agent_rule("displayName", "must be at most 256 characters"),
        id="display-257",
    ),
    # description
    pytest.param("description", DELETE, agent_rule("description", "is required"), id="desc-gone"),
    pytest.param("description", None, agent_rule("description", "must be a string"), id="d-null"),
    pytest.param(
        "description", "one\ntwo", agent_rule("description", "must be a single line"), id="desc-lf"
    ),
    pytest.param(
        "description",
        "d" * (MAX_AGENT_DESCRIPTION_LENGTH + 1),
        agent_rule("description", "must be at most 1,024 characters"),
        id="description-1025",
    ),
    # instructions
    pytest.param(
        "instructions", "Be brief.", agent_rule("instructions", "must be an array"), id="ins-str"
    ),
    pytest.param(
        "instructions",
        ["Be brief."],
        agent_rule("instructions[0]", "must be a JSON object"),
        id="instruction-string",
    ),
    pytest.param(
        "instructions",
        [{"text": "x"}],
        agent_rule("instructions[0].role", "is required"),
        id="instruction-role-missing",
    ),
    pytest.param(
        "instructions",
        [{"role": "user", "text": "x"}],
        agent_rule("instructions[0].role", "must be one of 'system', 'developer'"),
        id="instruction-role-user",
    ),
    pytest.param(
        "instructions",
        [{"role": "system", "text": "x"}, {"role": "system"}],
        agent_rule("instructions[1].text", "is required"),
        id="instruction-text-missing",
    ),
    pytest.param(
        "instructions",
        [{"role": "system", "text": 1}],
        agent_rule("instructions[0].text", "must be a string"),
        id="instruction-text-number",
    ),
    pytest.param(
        "instructions",
        [{"role": "system", "text": ""}],
        agent_rule("instructions[0].text", "must not be empty"),
        id="instruction-text-empty",
    ),
    # model
    pytest.param("model", None, agent_rule("model", "must be a string"), id="model-null"),
    *[
        pytest.param("model", bad, agent_rule("model", MODEL_RULE), id=f"model-{i}")
        for i, bad in enumerate(
            ["gpt-4", "/gpt-4", "openai/", "OpenAI/gpt-4", "openai/-x", "openai/a//b", "o p/x"]
        )
    ],
    pytest.param(
        "model",
        "p" * (MAX_PROVIDER_ID_LENGTH + 1) + "/m",
        agent_rule("model", "must have a provider id of at most 128 characters"),
        id="model-provider-129",
    ),
    pytest.param(
        "model",
        "p/" + "m" * (MAX_MODEL_ID_LENGTH + 1),
        agent_rule("model", "must have a model id of at most 512 characters"),
        id="model-id-513",
    ),
    # tools
    pytest.param("tools", "all", agent_rule("tools", "must be a JSON object"), id="tools-string"),
    pytest.param("tools", {}, agent_rule("tools.mode", "is required"), id="tools-mode-missing"),
    pytest.param(
        "tools",
        {"mode": "some"},
        agent_rule("tools.mode", "must be one of 'all', 'none', 'include'"),
        id="tools-mode-unknown",
    ),
    pytest.param(
        "tools",
        {"mode": "include"},
        agent_rule("tools.names", "is required"),
        id="tools-names-missing",
    ),
    pytest.param(
        "tools",
        {"mode": "include", "names": []},
        agent_rule("tools.names", "must name at least one tool"),
        id="tools-names-empty",
    ),
    pytest.param(
        "tools",
        {"mode": "include", "names": "read"},
        agent_rule("tools.names", "must be an array"),
        id="tools-names-string",
    ),
    pytest.param(
        "tools",
        {"mode": "include", "names": ["read", "Read"]},
        agent_rule("tools.names[1]", IDENTIFIER_RULE),
        id="tools-name-uppercase",
    ),
    pytest.param(
        "tools",
        {"mode": "include", "names": ["read", "read"]},
        agent_rule("tools.names[1]", "repeats an earlier entry"),
        id="tools-name-duplicate",
    ),
    pytest.param(
        "tools",
        {"mode": "include", "names": ["read"], "optionalNames": "task"},
        agent_rule("tools.optionalNames", "must be an array"),
        id="tools-optional-string",
    ),
    pytest.param(
        "tools",
        {"mode": "include", "names": ["read"], "optionalNames": ["a", "a"]},
        agent_rule("tools.optionalNames[1]", "repeats an earlier entry"),
        id="tools-optional-duplicate",
    ),
    pytest.param(
        "tools",
        {"mode": "include", "names": ["read", "task"], "optionalNames": ["skill", "task"]},
        agent_rule("tools.optionalNames[1]", "repeats a required name"),
        id="tools-optional-repeats-required",
    ),
    pytest.param(
        "tools",
        {"mode": "include", "names": ["read"], "optionalNames": ["mcp__x"]},
        agent_rule("tools.optionalNames[0]", IDENTIFIER_RULE),
        id="tools-optional-grammar",
    ),
    # toolChoice
    pytest.param(
        "toolChoice", "auto", agent_rule("toolChoice", "must be a JSON object"), id="choice-string"
    ),
    pytest.param(
        "toolChoice", {}, agent_rule("toolChoice.mode", "is required"), id="choice-mode-missing"
    ),
    pytest.param(
        "toolChoice",
        {"mode": "any"},
        agent_rule("toolChoice.mode", "must be one of 'auto', 'none', 'required', 'tool'"),
        id="choice-mode-unknown",
    ),
    pytest.param(
        "toolChoice",
        {"mode": "tool"},
        agent_rule("toolChoice.name", "is required"),
        id="choice-name-missing",
    ),
    pytest.param(
        "toolChoice",
        {"mode": "tool", "name": ["read"]},
        agent_rule("toolChoice.name", "must be a string"),
        id="choice-name-list",
    ),
    pytest.param(
        "toolChoice",
        {"mode": "tool", "name": ""},
        agent_rule("toolChoice.name", "must not be empty"),
        id="choice-name-empty",
    ),
    # settings
    pytest.param(
        "settings", [], agent_rule("settings", "must be a JSON object"), id="settings-list"
    ),
    *[
        pytest.param(
            "settings",
            {key: bad},
            agent_rule(f"settings.{key}", "must be a number"),
            id=f"{key}-{type(bad).__name__}",
        )
        for key in ("temperature", "topP", "maxOutputUnits", "seed")
        for bad in ("1", True, None)
    ],
    *[
        pytest.param(
            "settings",
            {key: bad},
            agent_rule(f"settings.{key}", "must be a finite number"),
            id=f"{key}-{bad}",
        )
        for key in ("temperature", "topP", "maxOutputUnits", "seed")
        for bad in (float("nan"), float("inf"), float("-inf"))
    ],
    pytest.param(
        "settings",
        {"temperature": -0.01},
        agent_rule("settings.temperature", "must be at least 0"),
        id="temperature-negative",
    ),
    *[
        pytest.param(
            "settings",
            {"topP": bad},
            agent_rule("settings.topP", "must be from 0 to 1"),
            id=f"topP-{bad}",
        )
        for bad in (-0.01, 1.01, 2)
    ],
    *[
        pytest.param(
            "settings",
            {"maxOutputUnits": bad},
            agent_rule("settings.maxOutputUnits", "must be a positive integer"),
            id=f"max-output-{bad}",
        )
        for bad in (0, -1, 0.0)
    ],
    pytest.param(
        "settings",
        {"maxOutputUnits": 1.5},
        agent_rule("settings.maxOutputUnits", "must be an integer"),
        id="max-output-fraction",
    ),
    pytest.param(
        "settings",
        {"stopSequences": "END"},
        agent_rule("settings.stopSequences", "must be an array"),
        id="stop-string",
    ),
    pytest.param(
        "settings",
        {"stopSequences": []},
        agent_rule("settings.stopSequences", "must hold at least one string"),
        id="stop-empty",
    ),
    pytest.param(
        "settings",
        {"stopSequences": ["END", 1]},
        agent_rule("settings.stopSequences[1]", "must be a string"),
        id="stop-number",
    ),
    pytest.param(
        "settings",
        {"stopSequences": ["END", ""]},
        agent_rule("settings.stopSequences[1]", "must not be empty"),
        id="stop-empty-string",
    ),
    *[
        pytest.param(
            "settings",
            {"seed": bad},
            agent_rule("settings.seed", "must be a safe integer"),
            id=f"seed-{bad}",
        )
        for bad in (MAX_SAFE_INTEGER + 1, -(MAX_SAFE_INTEGER + 1), 10**400)
    ],
    pytest.param(
        "settings",
        {"seed": 0.5},
        agent_rule("settings.seed", "must be an integer"),
        id="seed-fraction",
    ),
    pytest.param(
        "settings",
        {"reasoningEffort": "extreme"},
        agent_rule(
            "settings.reasoningEffort",
            "must be one of 'none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'",
        ),
        id="effort-unknown",
    ),
    # permissions
    pytest.param(
        "permissions", {}, agent_rule("permissions", "must be an array"), id="permissions-object"
    ),
    pytest.param(
        "permissions",
        ["allow"],
        agent_rule("permissions[0]", "must be a JSON object"),
        id="rule-string",
    ),
    pytest.param(
        "permissions",
        [{"resource": "*", "effect": "allow"}],
        agent_rule("permissions[0].action", "is required"),
        id="rule-action-missing",
    ),
    pytest.param(
        "permissions",
        [{"action": 1, "resource": "*", "effect": "allow"}],
        agent_rule("permissions[0].action", "must be a string"),
        id="rule-action-number",
    ),
    pytest.param(
        "permissions",
        [{"action": "read", "effect": "allow"}],
        agent_rule("permissions[0].resource", "is required"),
        id="rule-resource-missing",
    ),
    pytest.param(
        "permissions",
        [{"action": "read", "resource": None, "effect": "allow"}],
        agent_rule("permissions[0].resource", "must be a string"),
        id="rule-resource-null",
    ),
    pytest.param(
        "permissions",
        [{"action": "read", "resource": "*"}],
        agent_rule("permissions[0].effect", "is required"),
        id="rule-effect-missing",
    ),
    pytest.param(
        "permissions",
        [
            {"action": "read", "resource": "*", "effect": "allow"},
            {"action": "read", "resource": "*", "effect": "Allow"},
        ],
        agent_rule("permissions[1].effect", "must be one of 'allow', 'ask', 'deny'"),
        id="rule-effect-unknown",
    ),
    # mode and fallbackDefault
    pytest.param(
        "mode", "both", agent_rule("mode", "must be one of 'primary', 'subagent', 'all'"), id="m-?"
    ),
    pytest.param(
        "mode", None, agent_rule("mode", "must be one of 'primary', 'subagent', 'all'"), id="m-null"
    ),
    pytest.param(
        "fallbackDefault",
        "true",
        agent_rule("fallbackDefault", "must be true or false"),
        id="fallback-string",
    ),
    pytest.param(
        "fallbackDefault", 1, agent_rule("fallbackDefault", "must be true or false"), id="fb-one"
    ),
]


@pytest.mark.parametrize(("path", "value", "expected"), AGENT_REJECTS)
def test_agent_rejects(path: str, value: Any, expected: tuple[str, str]) -> None:
    assert agent_failure(changed(REVIEWER, path, value)) == expected


@pytest.mark.parametrize("value", [None, ["review"], "review", True])
def test_an_agent_declaration_must_be_an_object(value: Any) -> None:
    assert agent_failure(value) == (CODE, "Agent declaration must be a JSON object.")


def test_agent_ids_are_unique_among_registrations() -> None:
    other = changed(REVIEWER, "id", "team/review")
    assert [agent.id for agent in validate_agents([REVIEWER, other])] == ["review", "team/review"]
    with pytest.raises(WorkerHostError) as caught:
        validate_agents([other, REVIEWER, other])
    assert (caught.value.code, caught.value.message) == (
        CODE,
        "Agent 'team/review': id is registered more than once.",
    )


def test_agent_to_json_is_canonical_and_round_trips() -> None:
    declared = {
        "id": "team/review-docs",
        "displayName": " Docs reviewer ",
        "description": "Reviews documentation changes.",
        "instructions": [{"role": "system", "text": "Review docs.", "cache": True}],
        "model": "openai/gpt-4.1",
        "tools": {"mode": "include", "names": ["read", "task"], "optionalNames": ["skill"]},
        "toolChoice": {"mode": "required"},
        "settings": {"temperature": 0.2, "stopSequences": ["END"], "reasoningEffort": "low"},
        "permissions": [{"action": "task", "resource": "*", "effect": "allow"}],
        "mode": "primary",
        "fallbackDefault": True,
        "color": "blue",
    }
    canonical = {
        "id": "team/review-docs",
        "displayName": "Docs reviewer",
        "description": "Reviews documentation changes.",
        "instructions": [{"role": "system", "text": "Review docs."}],
        "model": "openai/gpt-4.1",
        "tools": {"mode": "include", "names": ["read", "task"], "optionalNames": ["skill"]},
        "toolChoice": {"mode": "required"},
        "settings": {"temperature": 0.2, "stopSequences": ["END"], "reasoningEffort": "low"},
        "permissions": [{"action": "task", "resource": "*", "effect": "allow"}],
        "mode": "primary",
        "fallbackDefault": True,
    }
    agent = validate_agent(declared)
    assert agent.to_json() == canonical
    assert validate_agent(agent.to_json()) == agent
    assert validate_agent(json.loads(json.dumps(agent.to_json()))).to_json() == canonical
    tool_choice = validate_agent(changed(declared, "toolChoice", {"mode": "tool", "name": "read"}))
    assert tool_choice.to_json()["toolChoice"] == {"mode": "tool", "name": "read"}
    assert validate_agent(tool_choice.to_json()) == tool_choice


# ---- the default agent ------------------------------------------------------------


def agent(agent_id: str, mode: str = "all", *, fallback: bool | None = None) -> Agent:
    value: dict[str, Any] = {**REVIEWER, "id": agent_id, "mode": mode}
    if fallback is not None:
        value["fallbackDefault"] = fallback
    return validate_agent(value)


CATALOG = [agent("main", "primary"), agent("both", "all"), agent("helper", "subagent")]


@pytest.mark.parametrize("default_id", [None, "main", "both"])
def test_the_default_agent_may_be_primary_or_all(default_id: str | None) -> None:
    check_default_agent(CATALOG, default_id)


@pytest.mark.parametrize(
    ("default_id", "message"),
    [
        ("helper", "Default agent 'helper': a subagent-only agent cannot be the default."),
        ("missing", "Default agent 'missing': no agent with this id is registered."),
        ("team/missing", "Default agent 'team/missing': no agent with this id is registered."),
        ("Not an id\n", "Default agent: agents.setDefault names no registered agent id."),
        ("", "Default agent: agents.setDefault names no registered agent id."),
    ],
)
def test_the_default_agent_must_exist_and_not_be_subagent_only(
    default_id: str, message: str
) -> None:
    with pytest.raises(WorkerHostError) as caught:
        check_default_agent(CATALOG, default_id)
    assert (caught.value.code, caught.value.message) == (CODE, message)


def test_the_default_agent_cannot_be_named_in_an_empty_catalog() -> None:
    with pytest.raises(WorkerHostError) as caught:
        check_default_agent([], "main")
    assert caught.value.code == CODE
    check_default_agent([], None)


def test_the_default_agent_id_must_be_a_string() -> None:
    bad: Any = 3
    with pytest.raises(WorkerHostError) as caught:
        check_default_agent(CATALOG, bad)
    assert (caught.value.code, caught.value.message) == (
        CODE,
        "Default agent: agents.setDefault takes an agent id string.",
    )


@pytest.mark.parametrize(
    ("agents", "expected"),
    [
        pytest.param([], None, id="no-agents"),
        pytest.param([agent("b", "subagent"), agent("a", "subagent")], None, id="only-subagents"),
        pytest.param(
            [agent("a", "subagent", fallback=True)], None, id="subagent-preference-ignored"
        ),
        pytest.param(
            [agent("c"), agent("b", "primary"), agent("a", "subagent")],
            "b",
            id="lexical-fallback-skips-subagents",
        ),
        pytest.param(
            [agent("a"), agent("z", fallback=True)], "z", id="preference-beats-lexical-order"
        ),
        pytest.param(
            [agent("z", "primary", fallback=True), agent("m", fallback=True), agent("a")],
            "m",
            id="tie-first-by-lexical-id",
        ),
        pytest.param(
            [agent("b", fallback=True), agent("a", "subagent", fallback=True)],
            "b",
            id="subagent-excluded-from-tie",
        ),
        pytest.param(
            [agent("c", fallback=False), agent("d", fallback=True)],
            "d",
            id="false-is-no-preference",
        ),
        pytest.param(
            [agent("team/a", fallback=True), agent("team-a", fallback=True)],
            "team-a",
            id="lexical-by-code-point",
        ),
        pytest.param(
            [agent("team/a"), agent("team-a")], "team-a", id="lexical-fallback-code-point"
        ),
    ],
)
def test_fallback_default(agents: list[Agent], expected: str | None) -> None:
    assert fallback_default(agents) == expected
    assert fallback_default(list(reversed(agents))) == expected
