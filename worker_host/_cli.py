"""The `worker-host` command: a thin shell over the embedding API.

Every failure prints one line, ``worker-host: error[CODE]: MESSAGE``, on
stderr and exits non-zero (1 for a failed operation, 2 for a usage error);
no traceback unless `WORKER_HOST_DEBUG=1`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from ._cli_bundle import add_bundle_commands, run_bundle_command
from ._cli_turns import (
    REPLIES,
    add_session_commands,
    client_for,
    print_inspect,
    printable,
    run_session_command,
)
from ._config import CONFIG_VARIABLE, load_config, read_trusted_keys
from ._errors import WorkerHostError
from ._host import Host, HostConfig
from ._revisions import ToolsDelta
from ._session import PluginInfo

EXIT_FAILED = 1
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        _print_error("usage", f"{message} (see {self.prog} --help)")
        sys.exit(EXIT_USAGE)


def _print_error(code: str, message: str) -> None:
    print(f"worker-host: error[{code}]: {message}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--data-dir", type=Path, default=argparse.SUPPRESS,
        help="state directory (default: $WORKER_HOST_DATA_DIR or the per-user data directory)",
    )
    common.add_argument(
        "--ca-bundle", type=Path, default=argparse.SUPPRESS,
        help="PEM file of CAs to trust for bundle fetches (default: SSL_CERT_FILE or the system)",
    )
    common.add_argument(
        "--allow-http-loopback", action="store_true", default=argparse.SUPPRESS,
        help="accept plain http bundle URLs on loopback hosts (development only)",
    )
    common.add_argument(
        "--config", type=Path, default=argparse.SUPPRESS, metavar="FILE",
        help="the operator's JSON config file (default: $WORKER_HOST_CONFIG)",
    )
    common.add_argument(
        "--trust-key", type=Path, action="append", default=argparse.SUPPRESS, metavar="PUB",
        help="trust bundles signed by this Ed25519 public key (repeatable); "
             "unsigned bundles are then refused",
    )
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="log plugin and host activity to stderr")

    parser = _Parser(prog="worker-host", description="Run agent plugins in Wasm isolates.",
                     parents=[common])
    groups = parser.add_subparsers(dest="group", required=True, parser_class=_Parser)

    plugins = groups.add_parser("plugins", help="add, list, refresh and remove session plugins")
    plugin_commands = plugins.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add = plugin_commands.add_parser("add", parents=[common], help="pin and activate a bundle")
    add.add_argument("--session", required=True)
    add.add_argument("--bundle", required=True, metavar="URL", help="https URL of the bundle")
    add.add_argument("--plugin-id", required=True)
    add.add_argument("--sha256", metavar="HEX", help="refuse the bundle unless it has this digest")
    add.add_argument("--options", metavar="JSON", help="plugin options, a JSON object")
    add.add_argument("--signature", type=Path, metavar="FILE",
                     help="the bundle's detached signature (default: fetch URL.sig)")
    listing = plugin_commands.add_parser("list", parents=[common], help="show the pins")
    listing.add_argument("--session", required=True)
    listing.add_argument("--json", action="store_true")
    refresh = plugin_commands.add_parser("refresh", parents=[common],
                                         help="refetch a pin's URL; a new digest re-pins it")
    refresh.add_argument("--session", required=True)
    refresh.add_argument("plugin_id", metavar="PLUGIN_ID")
    remove = plugin_commands.add_parser("remove", parents=[common], help="unpin a plugin")
    remove.add_argument("--session", required=True)
    remove.add_argument("plugin_id", metavar="PLUGIN_ID")
    inspect = plugin_commands.add_parser("inspect", parents=[common],
                                         help="a plugin's pin, state, contributions and shape")
    inspect.add_argument("--session", required=True)
    inspect.add_argument("plugin_id", metavar="PLUGIN_ID")
    inspect.add_argument("--json", action="store_true")

    tools = groups.add_parser("tools", help="list and call the tools of a session")
    tool_commands = tools.add_subparsers(dest="command", required=True, parser_class=_Parser)
    tools_list = tool_commands.add_parser("list", parents=[common],
                                          help="the model-facing tool descriptors")
    tools_list.add_argument("--session", required=True)
    tools_list.add_argument("--json", action="store_true")
    call = tool_commands.add_parser("call", parents=[common], help="call one tool")
    call.add_argument("--session", required=True)
    call.add_argument("name", metavar="TOOL")
    call.add_argument("--input", default="{}", metavar="JSON", help="the tool input, a JSON object")
    call.add_argument("--turn", metavar="TURN_ID",
                      help="call inside this Turn (default: a Turn of its own)")
    call.add_argument("--approve", choices=REPLIES,
                      help="answer every permission request with this reply")
    call.add_argument("--wait-remote", action="store_true",
                      help="wait for 'turns reply' (from any process) to answer approvals")
    call.add_argument("--answer", metavar="JSON",
                      help="answers to the tool's questions, e.g. '[[\"yes\"]]'")

    add_session_commands(groups, common, _Parser)
    add_bundle_commands(groups, common, _Parser)
    return parser


def _json_argument(text: str, flag: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkerHostError(
            "invalid_json", f"{flag} is not valid JSON ({exc.msg} at position {exc.pos})."
        ) from exc


def _print_delta(delta: ToolsDelta | None) -> None:
    if delta is None:
        return
    for name, plugin_id in delta.added:
        print(f"  + tool {name}  [{plugin_id}]")
    for name, plugin_id in delta.removed:
        print(f"  - tool {name}  [{plugin_id}]")


def _describe_plugin(plugin: PluginInfo) -> str:
    signed = f"  signed by {plugin.signer}" if plugin.signer else ""
    return f"{plugin.plugin_id}  sha256:{plugin.sha256}  {plugin.shape}  {plugin.url}{signed}"


def _config(args: argparse.Namespace) -> HostConfig:
    """The config file (if any), then the command line's overrides."""
    path = getattr(args, "config", None) or os.environ.get(CONFIG_VARIABLE)
    config = load_config(path) if path else HostConfig()
    overrides: dict[str, Any] = {}
    if getattr(args, "data_dir", None):
        overrides["data_dir"] = args.data_dir
    if getattr(args, "ca_bundle", None):
        overrides["ca_bundle"] = args.ca_bundle
    if getattr(args, "allow_http_loopback", False):
        overrides["allow_http_loopback"] = True
    if getattr(args, "trust_key", None):
        overrides["trust"] = read_trusted_keys(args.trust_key)
    return replace(config, **overrides)


def _read_signature(path: Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise WorkerHostError("signature_unreadable", f"Cannot read {path}.") from exc


async def _run(args: argparse.Namespace) -> int:
    config = _config(args)
    if args.group == "bundle":
        return await run_bundle_command(args, config, _json_argument)
    async with Host(config) as host:
        if args.group in ("rules", "turns", "catalog"):
            return await run_session_command(args, host, _json_argument)
        if args.group == "plugins" and args.command == "add":
            options = None if args.options is None else _json_argument(args.options, "--options")
            session = host.session(args.session, create=True)
            plugin = await session.add_plugin(
                args.bundle, args.plugin_id, sha256=args.sha256, options=options,
                signature=_read_signature(args.signature),
            )
            print(f"added {_describe_plugin(plugin)}")
            _print_delta(plugin.delta)
        elif args.group == "plugins" and args.command == "list":
            plugins = host.session(args.session).plugins()
            if args.json:
                print(json.dumps([plugin.__dict__ for plugin in plugins], indent=2))
            else:
                for plugin in plugins:
                    print(_describe_plugin(plugin))
        elif args.group == "plugins" and args.command == "refresh":
            result = await host.session(args.session).refresh_plugin(args.plugin_id)
            if result.changed:
                print(f"refreshed {args.plugin_id}: sha256:{result.previous_sha256} -> "
                      f"sha256:{result.plugin.sha256}")
                _print_delta(result.delta)
            else:
                print(f"unchanged {args.plugin_id}: sha256:{result.plugin.sha256}")
        elif args.group == "plugins" and args.command == "remove":
            delta = await host.session(args.session).remove_plugin(args.plugin_id)
            print(f"removed {args.plugin_id}")
            _print_delta(delta)
        elif args.group == "plugins" and args.command == "inspect":
            print_inspect(host.session(args.session).inspect(args.plugin_id), args.json)
        elif args.group == "tools" and args.command == "list":
            tools = host.session(args.session).tools()
            if args.json:
                print(json.dumps([tool.to_json() for tool in tools], indent=2, ensure_ascii=False))
            else:
                for tool in tools:
                    print(printable(f"{tool.name}  [{tool.plugin_id}]"))
                    print(printable(f"  {tool.description}"))
                    print(f"  input: {json.dumps(tool.input_schema)}")
        elif args.group == "tools" and args.command == "call":
            tool_input = _json_argument(args.input, "--input")
            session = host.session(args.session)
            client = (session.remote_replies() if args.wait_remote
                      else client_for(args, _json_argument))
            outcome = await session.call_tool(args.name, tool_input, turn_id=args.turn,
                                              client=client)
            if not outcome.ok:
                _print_error(str(outcome.code), str(outcome.message))
                return EXIT_FAILED
            print(outcome.text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `worker-host` console script."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
        format="worker-host: %(name)s: %(message)s",
    )
    try:
        return asyncio.run(_run(args))
    except WorkerHostError as exc:
        _print_error(exc.code, exc.message)
        return EXIT_FAILED
    except KeyboardInterrupt:
        _print_error("interrupted", "Interrupted.")
        return 130
    except Exception:  # a bug: say so in one line, the traceback only on request
        if os.environ.get("WORKER_HOST_DEBUG") == "1":
            traceback.print_exc()
        _print_error("internal", "Unexpected failure (set WORKER_HOST_DEBUG=1 for details).")
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
