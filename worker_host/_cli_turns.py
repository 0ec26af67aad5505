"""`worker-host rules|turns|catalog` and `plugins inspect`, and the CLI's client
for permission requests and questions.

Approvals and questions are answered interactively when stdin and stderr are
a terminal, or non-interactively with `--approve once|always|reject` and
`--answer JSON`; with neither, no client can answer: requests are denied and
questions dismissed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from ._errors import WorkerHostError
from ._host import Host
from ._session import Session
from ._turns import PermissionAnswer, Reply

REPLIES = ("once", "always", "reject")


def printable(text: object) -> str:
    """Plugin-chosen text for a terminal: control and bidi characters escaped,
    so a bundle cannot inject escape sequences or fake lines."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in str(text))


class CliClient:
    """Answers from flags, else from a person at the terminal, else nobody."""

    def __init__(self, approve: Reply | None, answers: Any, interactive: bool) -> None:
        self._approve = approve
        self._answers = answers
        self._interactive = interactive

    async def permission(self, request: dict[str, Any]) -> PermissionAnswer | None:
        if self._approve is not None:
            return PermissionAnswer(self._approve)
        if not self._interactive:
            return None
        resources = ", ".join(request["resources"])
        saves = ", ".join(request.get("save") or []) or "nothing (acts like once)"
        prompt = printable(f"Allow {request['toolId']} to {request['action']} {resources}? "
                           f"(always saves: {saves}) ") + "[o]nce, [a]lways, [r]eject: "
        while True:
            line = await asyncio.to_thread(_ask, prompt)
            if line == "":  # end of input: nobody can answer
                return None
            reply = line.strip().lower()
            for choice in REPLIES:
                if reply and choice.startswith(reply):
                    return PermissionAnswer(choice)  # type: ignore[arg-type]

    async def question(self, request: dict[str, Any]) -> list[list[str]] | None:
        if self._answers is not None:
            return self._answers  # type: ignore[no-any-return]
        if not self._interactive:
            return None
        answers = []
        for prompt in request["questions"]:
            labels = [option["label"] for option in prompt["options"]]
            question = f"{prompt['header']}: {prompt['question']} ({' / '.join(labels)})"
            text = printable(question) + " "
            answer = (await asyncio.to_thread(_ask, text)).strip()
            if not answer:
                return None
            answers.append([answer])
        return answers


def _ask(prompt: str) -> str:
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return sys.stdin.readline()


def client_for(args: argparse.Namespace, json_argument: Any) -> CliClient:
    answers = None
    if getattr(args, "answer", None) is not None:
        answers = json_argument(args.answer, "--answer")
        if not (isinstance(answers, list) and all(isinstance(a, list) for a in answers)):
            raise WorkerHostError("invalid_answer",
                                  "--answer must be a JSON list of lists of strings.")
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    return CliClient(getattr(args, "approve", None), answers, interactive)


def add_session_commands(
    groups: argparse._SubParsersAction[Any], common: argparse.ArgumentParser,
    parser_class: type[argparse.ArgumentParser],
) -> None:
    """Adds `rules`, `turns` and `catalog` to the CLI's parser."""
    rules = groups.add_parser("rules", help="session permission rules")
    rule_commands = rules.add_subparsers(dest="command", required=True, parser_class=parser_class)
    add = rule_commands.add_parser("add", parents=[common], help="append a rule (last match wins)")
    add.add_argument("--session", required=True)
    add.add_argument("--action", required=True, metavar="PATTERN")
    add.add_argument("--resource", required=True, metavar="PATTERN")
    add.add_argument("--effect", required=True, choices=("allow", "ask", "deny"))
    listing = rule_commands.add_parser("list", parents=[common], help="the session's rules")
    listing.add_argument("--session", required=True)
    listing.add_argument("--json", action="store_true")

    turns = groups.add_parser("turns", help="begin, end and show Turns")
    turn_commands = turns.add_subparsers(dest="command", required=True, parser_class=parser_class)
    begin = turn_commands.add_parser("begin", parents=[common],
                                     help="begin a Turn (runs the turn.before hooks)")
    begin.add_argument("--session", required=True)
    begin.add_argument("--prompt", default="")
    begin.add_argument("--model", default="worker-host/direct", metavar="PROVIDER/MODEL")
    begin.add_argument("--agent", metavar="AGENT_ID")
    end = turn_commands.add_parser("end", parents=[common], help="complete a Turn")
    end.add_argument("--session", required=True)
    end.add_argument("turn_id", metavar="TURN_ID")
    end.add_argument("--text", default="", help="the model's visible text")
    pending = turn_commands.add_parser("pending", parents=[common],
                                       help="permission requests waiting for a reply")
    pending.add_argument("--session", required=True)
    pending.add_argument("--json", action="store_true")
    reply = turn_commands.add_parser("reply", parents=[common],
                                     help="answer a waiting permission request")
    reply.add_argument("--session", required=True)
    reply.add_argument("request_id", metavar="REQUEST_ID")
    reply.add_argument("reply", choices=REPLIES)
    reply.add_argument("--message", help="a message for the model with a reject")
    events = turn_commands.add_parser("events", parents=[common], help="a Turn's events")
    events.add_argument("--session", required=True)
    events.add_argument("turn_id", metavar="TURN_ID")
    events.add_argument("--json", action="store_true")

    catalog = groups.add_parser("catalog", parents=[common],
                                help="a session's tools, skills, agents and default agent")
    catalog.add_argument("--session", required=True)
    catalog.add_argument("--skill", metavar="SKILL_ID", help="print one Skill as it is loaded")
    catalog.add_argument("--json", action="store_true")


def _model(text: str) -> dict[str, str]:
    provider, separator, model = text.partition("/")
    if not separator or not provider or not model:
        raise WorkerHostError("invalid_model", "--model takes PROVIDER/MODEL.")
    return {"providerId": provider, "modelId": model}


def _event_line(event: dict[str, Any]) -> str:
    kind = event["type"]
    details = {key: value for key, value in event.items() if key not in ("type", "turnId")}
    return f"{kind:<18} {json.dumps(details, ensure_ascii=False)}"


async def run_session_command(args: argparse.Namespace, host: Host, json_argument: Any) -> int:
    """Runs a `rules`, `turns` or `catalog` command; returns the exit code."""
    session = host.session(args.session)
    if args.group == "rules":
        if args.command == "add":
            session.add_rule(args.action, args.resource, args.effect)
            print(f"added rule {args.action} {args.resource} {args.effect}")
        else:
            rules = [rule.__dict__ for rule in session.rules()]
            if args.json:
                print(json.dumps(rules, indent=2))
            for rule in [] if args.json else rules:
                print(f"{rule['action']}  {rule['resource']}  {rule['effect']}")
        return 0
    if args.group == "turns":
        if args.command == "begin":
            turn = await session.begin_turn(args.prompt, model=_model(args.model),
                                            agent=args.agent)
            print(turn.id)
        elif args.command == "end":
            outcome = await session.turn(args.turn_id).end(args.text)
            print(f"ended {outcome['turnId']}: {outcome['kind']}")
        elif args.command == "pending":
            requests = session.pending_requests()
            if args.json:
                print(json.dumps(requests, indent=2, ensure_ascii=False))
            for request in [] if args.json else requests:
                print(printable(f"{request['id']}  {request['toolId']}  {request['action']}  "
                                f"{', '.join(request['resources'])}"))
        elif args.command == "reply":
            session.reply_permission(args.request_id, args.reply, args.message)
            print(f"replied {args.reply} to {args.request_id}")
        else:
            events = session.turn(args.turn_id).events()
            if args.json:
                print(json.dumps(events, indent=2, ensure_ascii=False))
            else:
                for event in events:
                    print(printable(_event_line(event)))
        return 0
    return _catalog(session, args)


def _catalog(session: Session, args: argparse.Namespace) -> int:
    if args.skill:
        print(session.load_skill(args.skill))
        return 0
    catalog = session.catalog()
    document: dict[str, Any] = {
        "tools": [tool.to_json() for tool in session.tools()],
        "skills": [{"pluginId": plugin_id, **skill.to_json()}
                   for plugin_id, skill in session.skills()],
        "agents": [{"pluginId": plugin_id, **agent.to_json()}
                   for plugin_id, agent in session.agents()],
        "defaultAgent": catalog.default_agent,
    }
    if args.json:
        print(json.dumps(document, indent=2, ensure_ascii=False))
        return 0
    for tool in document["tools"]:
        print(printable(f"tool   {tool['name']}  [{tool['pluginId']}]"))
    for skill in document["skills"]:
        print(printable(f"skill  {skill['id']}  [{skill['pluginId']}]  {skill['description']}"))
    for agent in document["agents"]:
        print(printable(f"agent  {agent['id']}  [{agent['pluginId']}]  {agent['description']}"))
    print(printable(f"default agent: {document['defaultAgent'] or '-'}"))
    return 0


def print_inspect(report: dict[str, Any], as_json: bool) -> None:
    """`plugins inspect`: the pin, state, fingerprint, contributions and shape."""
    if as_json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return
    print(f"plugin       {report['pluginId']}  ({report['scope']} scope)")
    print(f"state        {report['state']}")
    if report["state"] == "failed":
        print(f"failure      {report['failure']}")
        return
    pin = report["pin"]
    print(f"url          {pin['url']}")
    print(f"sha256       {pin['sha256']}")
    print(f"options      {json.dumps(pin['options'], sort_keys=True)}")
    print(f"signed by    {pin['signer'] or '-'}")
    print(f"fingerprint  {report['fingerprint']}")
    print(f"shape        {report['shape']}")
    print(printable(f"tools        {', '.join(t['id'] for t in report['tools']) or '-'}"))
    print(f"hooks        {', '.join(report['hooks']) or '-'}")
    print(printable(f"skills       {', '.join(s['id'] for s in report['skills']) or '-'}"))
    print(printable(f"agents       {', '.join(a['id'] for a in report['agents']) or '-'}"))
    print(printable(f"default      {report['defaultAgent'] or '-'}"))
