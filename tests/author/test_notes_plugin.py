"""A plugin author's own tests, written as an author would write them.

They use only the `plugin_harness` fixture that installing worker-host brings
(the `pytest11` entry point) and a bundle built from the author's source.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sdk import build_bundle
from worker_host.testing import PluginHarness

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def notes_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist") / "notes.mjs"
    build_bundle(EXAMPLES / "notes" / "plugin.mjs", out)
    return out


def test_setup_is_deterministic(plugin_harness: PluginHarness, notes_bundle: Path) -> None:
    manifest = plugin_harness.check_setup(notes_bundle, {"folder": "journal"})
    assert [tool.id for tool in manifest.tools] == ["notes_save"]
    assert manifest.tools[0].description == (
        "Save a Markdown note in the journal/ folder, replacing a note with the same title."
    )


def test_saves_a_note(plugin_harness: PluginHarness, notes_bundle: Path) -> None:
    result = plugin_harness.call_tool(notes_bundle, "notes_save",
                                      {"title": "Hello", "body": "world"})
    assert (result.code, result.value) == (
        None, {"saved": "/workspace/notes/hello.md", "bytes": 15}
    )
    assert plugin_harness.files == {"notes/hello.md": "# Hello\n\nworld\n"}


def test_invalid_input_is_what_the_model_sees(
    plugin_harness: PluginHarness, notes_bundle: Path
) -> None:
    result = plugin_harness.call_tool(notes_bundle, "notes_save", {"title": ""})
    assert (result.code, result.message) == ("invalid_input", "Tool input validation failed.")


def test_a_nondeterministic_setup_fails_with_the_difference(
    plugin_harness: PluginHarness, tmp_path: Path
) -> None:
    bundle = build_bundle(EXAMPLES / "dice" / "plugin.mjs", tmp_path / "dice.mjs")
    with pytest.raises(AssertionError) as caught:
        plugin_harness.check_setup(bundle)
    message = str(caught.value)
    assert message.startswith("setup is not deterministic: tool roll: description: ")
    assert " then " in message
