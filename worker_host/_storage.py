"""Durable state: sessions, their immutable plugin revisions, and pins.

SQLite in the data directory by default (nothing to start). A revision is a
numbered, immutable set of pins; changing pins writes a new revision and moves
the session's pointer to it in one transaction, guarded by the version it was
built on, so concurrent processes cannot lose each other's change.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._errors import WorkerHostError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    workdir TEXT NOT NULL,
    revision INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS revisions (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    version INTEGER NOT NULL,
    revision_id TEXT NOT NULL,
    PRIMARY KEY (session_id, version)
);
CREATE TABLE IF NOT EXISTS pins (
    session_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    position INTEGER NOT NULL,
    plugin_id TEXT NOT NULL,
    url TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    options TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    manifest TEXT NOT NULL,
    signature TEXT,
    signer TEXT,
    cleanup INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, version, position),
    FOREIGN KEY (session_id, version) REFERENCES revisions(session_id, version)
);
CREATE TABLE IF NOT EXISTS rules (
    session_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    action TEXT NOT NULL,
    resource TEXT NOT NULL,
    effect TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
);
CREATE TABLE IF NOT EXISTS saved_permissions (
    session_id TEXT NOT NULL,
    action TEXT NOT NULL,
    pattern TEXT NOT NULL,
    PRIMARY KEY (session_id, action, pattern)
);
CREATE TABLE IF NOT EXISTS turns (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    model TEXT NOT NULL,
    outcome TEXT,
    agent TEXT
);
CREATE TABLE IF NOT EXISTS turn_events (
    turn_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (turn_id, seq)
);
CREATE TABLE IF NOT EXISTS permission_requests (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    request TEXT NOT NULL,
    reply TEXT,
    message TEXT
);
CREATE TABLE IF NOT EXISTS host_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    config_sha256 TEXT NOT NULL,
    failures TEXT NOT NULL
);
"""

# The host scope's revisions live beside the sessions' under this id, which no
# session can have (session ids start with a letter or digit).
HOST_SCOPE = "@host"

# Columns added after the first release, with their declarations, so a database
# made by an older version is brought up to date when it is opened.
_ADDED_COLUMNS = {
    "pins": (("signature", "TEXT"), ("signer", "TEXT"), ("cleanup", "INTEGER NOT NULL DEFAULT 0")),
    "turns": (("agent", "TEXT"),),
}


@dataclass(frozen=True)
class Pin:
    """One plugin of a revision: where it came from, its digest and options,
    the fingerprint and canonical manifest its activation produced, and, when a
    trust policy was in force, its detached signature and the signer's key id."""

    plugin_id: str
    url: str
    sha256: str
    options: dict[str, Any]
    fingerprint: str
    manifest: str
    signature: str | None = None
    signer: str | None = None
    cleanup: bool = False


@dataclass(frozen=True)
class Revision:
    """An immutable set of pins for one session. Version 0 is the empty start."""

    session_id: str
    version: int
    revision_id: str
    pins: tuple[Pin, ...] = field(default=())

    def pin(self, plugin_id: str) -> Pin | None:
        return next((pin for pin in self.pins if pin.plugin_id == plugin_id), None)


@dataclass(frozen=True)
class TurnRecord:
    """A stored Turn: its session, model identity and outcome (None while open)."""

    id: str
    session_id: str
    model: dict[str, Any]
    outcome: dict[str, Any] | None
    agent: str | None = None


class SqliteStore:
    """The SQLite store. Thread-safe; one connection guarded by a lock.

    Raises `WorkerHostError` `store_failed` when the database cannot be opened
    or written, and `revision_conflict` when another writer changed the
    session's pins first.
    """

    def __init__(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # WAL's usual durability: safe across process crashes, no fsync per
            # commit (a Turn commits each of its events).
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
            self._migrate()
        except (sqlite3.Error, OSError) as exc:
            raise WorkerHostError(
                "store_failed", "The state database could not be opened."
            ) from exc
        self._lock = threading.Lock()
        self._closed = False

    def _migrate(self) -> None:
        for table, columns in _ADDED_COLUMNS.items():
            present = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            for name, declaration in columns:
                if name not in present:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")

    def close(self) -> None:
        """Closes the database. Safe to call twice."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._closed:
                raise WorkerHostError("store_closed", "The host was closed.")
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise WorkerHostError("store_failed", "The state database failed.") from exc

    def create_session(self, session_id: str, workdir: str) -> bool:
        """Creates the session with an empty revision 0; False if it exists."""
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                return False
            db.execute("INSERT INTO sessions (id, workdir) VALUES (?, ?)", (session_id, workdir))
            db.execute(
                "INSERT INTO revisions (session_id, version, revision_id) VALUES (?, 0, ?)",
                (session_id, str(uuid.uuid4())),
            )
            return True

    def session_workdir(self, session_id: str) -> str | None:
        """The session's workdir, or None when there is no such session."""
        with self._transaction() as db:
            row = db.execute("SELECT workdir FROM sessions WHERE id = ?", (session_id,)).fetchone()
            return None if row is None else str(row[0])

    def session_ids(self) -> list[str]:
        with self._transaction() as db:
            return [str(row[0]) for row in db.execute("SELECT id FROM sessions ORDER BY id")]

    def current_revision(self, session_id: str) -> Revision:
        """The session's active revision. Raises `session_not_found`."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT revision FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise session_not_found(session_id)
            return self._revision(db, session_id, int(row[0]))

    def _revision(self, db: sqlite3.Connection, session_id: str, version: int) -> Revision:
        (revision_id,) = db.execute(
            "SELECT revision_id FROM revisions WHERE session_id = ? AND version = ?",
            (session_id, version),
        ).fetchone()
        rows = db.execute(
            "SELECT plugin_id, url, sha256, options, fingerprint, manifest, signature, signer, "
            "cleanup FROM pins WHERE session_id = ? AND version = ? ORDER BY position",
            (session_id, version),
        ).fetchall()
        pins = tuple(
            Pin(row[0], row[1], row[2], json.loads(row[3]), row[4], row[5], row[6], row[7],
                bool(row[8]))
            for row in rows
        )
        return Revision(session_id, version, str(revision_id), pins)

    def commit_revision(
        self, session_id: str, based_on: int, revision_id: str, pins: Sequence[Pin]
    ) -> Revision:
        """Writes revision `based_on + 1` and makes it current.

        Raises `revision_conflict` when the current revision is no longer
        `based_on`; nothing is written then.
        """
        version = based_on + 1
        with self._transaction() as db:
            row = db.execute(
                "SELECT revision FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise session_not_found(session_id)
            if int(row[0]) != based_on:
                raise WorkerHostError(
                    "revision_conflict",
                    f"Session {session_id} changed while this change was prepared; try again.",
                )
            db.execute(
                "INSERT INTO revisions (session_id, version, revision_id) VALUES (?, ?, ?)",
                (session_id, version, revision_id),
            )
            db.executemany(
                "INSERT INTO pins (session_id, version, position, plugin_id, url, sha256, "
                "options, fingerprint, manifest, signature, signer, cleanup) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (session_id, version, position, pin.plugin_id, pin.url, pin.sha256,
                     json.dumps(pin.options, sort_keys=True), pin.fingerprint, pin.manifest,
                     pin.signature, pin.signer, int(pin.cleanup))
                    for position, pin in enumerate(pins)
                ],
            )
            db.execute("UPDATE sessions SET revision = ? WHERE id = ?", (version, session_id))
        return Revision(session_id, version, revision_id, tuple(pins))

    def add_rule(self, session_id: str, action: str, resource: str, effect: str) -> None:
        """Appends one permission rule to a session's rules."""
        with self._transaction() as db:
            (count,) = db.execute("SELECT COUNT(*) FROM rules WHERE session_id = ?",
                                  (session_id,)).fetchone()
            db.execute("INSERT INTO rules VALUES (?, ?, ?, ?, ?)",
                       (session_id, int(count), action, resource, effect))


    def rules(self, session_id: str) -> list[tuple[str, str, str]]:
        """A session's rules in order: (action, resource, effect)."""
        with self._transaction() as db:
            return [(str(a), str(r), str(e)) for a, r, e in db.execute(
                "SELECT action, resource, effect FROM rules WHERE session_id = ? ORDER BY position",
                (session_id,))]


    def save_permissions(self, session_id: str,
                         saved: list[tuple[str, str]]) -> None:
        """Stores `always` patterns (action, pattern) for the session."""
        with self._transaction() as db:
            db.executemany("INSERT OR IGNORE INTO saved_permissions VALUES (?, ?, ?)",
                           [(session_id, action, pattern) for action, pattern in saved])


    def saved_permissions(self, session_id: str) -> list[tuple[str, str]]:
        with self._transaction() as db:
            return [(str(a), str(p)) for a, p in db.execute(
                "SELECT action, pattern FROM saved_permissions WHERE session_id = ? "
                "ORDER BY action, pattern", (session_id,))]


    def create_turn(self, turn_id: str, session_id: str,
                    model: dict[str, Any], agent: str | None = None) -> None:
        with self._transaction() as db:
            db.execute("INSERT INTO turns (id, session_id, model, agent) VALUES (?, ?, ?, ?)",
                       (turn_id, session_id, json.dumps(model), agent))


    def load_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        """A session's Turn. Raises `turn_not_found`."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT model, outcome, agent FROM turns WHERE id = ? AND session_id = ?",
                (turn_id, session_id)).fetchone()
        if row is None:
            raise WorkerHostError("turn_not_found",
                                  f"Session {session_id} has no turn {turn_id!r}.")
        return TurnRecord(turn_id, session_id, json.loads(row[0]),
                          None if row[1] is None else json.loads(row[1]), row[2])


    def append_event(self, turn_id: str, event: dict[str, Any],
                     outcome: dict[str, Any] | None = None) -> int:
        """Appends an event (and, for the last one, the outcome); returns its number.

        Raises `turn_ended` once the Turn has an outcome: nothing follows
        `turn.terminal`, and a Turn ends once.
        """
        with self._transaction() as db:
            ended = db.execute("SELECT outcome IS NOT NULL FROM turns WHERE id = ?",
                               (turn_id,)).fetchone()
            if ended is not None and ended[0]:
                raise WorkerHostError("turn_ended", f"Turn {turn_id} has already ended.")
            (last,) = db.execute("SELECT COALESCE(MAX(seq), 0) FROM turn_events WHERE turn_id = ?",
                                 (turn_id,)).fetchone()
            db.execute("INSERT INTO turn_events VALUES (?, ?, ?)",
                       (turn_id, int(last) + 1, json.dumps(event, ensure_ascii=False)))
            if outcome is not None:
                db.execute("UPDATE turns SET outcome = ? WHERE id = ?",
                           (json.dumps(outcome, ensure_ascii=False), turn_id))
            return int(last) + 1


    def turn_events(self, turn_id: str) -> list[dict[str, Any]]:
        with self._transaction() as db:
            return [json.loads(row[0]) for row in db.execute(
                "SELECT event FROM turn_events WHERE turn_id = ? ORDER BY seq", (turn_id,))]


    def add_permission_request(self, session_id: str, request: dict[str, Any]) -> None:
        """Records a request that waits for a reply from any process."""
        with self._transaction() as db:
            db.execute("INSERT INTO permission_requests (id, session_id, request) VALUES (?, ?, ?)",
                       (request["id"], session_id, json.dumps(request, ensure_ascii=False)))

    def pending_permission_requests(self, session_id: str) -> list[dict[str, Any]]:
        """The session's requests that wait for a reply, oldest first."""
        with self._transaction() as db:
            return [json.loads(row[0]) for row in db.execute(
                "SELECT request FROM permission_requests WHERE session_id = ? AND reply IS NULL "
                "ORDER BY rowid", (session_id,))]

    def reply_permission(self, session_id: str, request_id: str, reply: str,
                         message: str | None) -> bool:
        """Stores the reply of a waiting request; False when none was waiting."""
        with self._transaction() as db:
            done = db.execute(
                "UPDATE permission_requests SET reply = ?, message = ? "
                "WHERE id = ? AND session_id = ? AND reply IS NULL",
                (reply, message, request_id, session_id))
            return done.rowcount == 1

    def permission_reply(self, request_id: str) -> tuple[str, str | None] | None:
        with self._transaction() as db:
            row = db.execute("SELECT reply, message FROM permission_requests WHERE id = ?",
                             (request_id,)).fetchone()
        return None if row is None or row[0] is None else (str(row[0]), row[1])

    def close_permission_request(self, request_id: str) -> None:
        """Withdraws a request that was settled otherwise (saved, timeout, Turn ended)."""
        with self._transaction() as db:
            db.execute("UPDATE permission_requests SET reply = COALESCE(reply, 'withdrawn') "
                       "WHERE id = ?", (request_id,))

    def host_state(self) -> tuple[str, list[dict[str, Any]]] | None:
        """The config digest the host revision was built from, and its failed plugins."""
        with self._transaction() as db:
            row = db.execute("SELECT config_sha256, failures FROM host_state").fetchone()
        return None if row is None else (str(row[0]), json.loads(row[1]))


    def set_host_state(self, config_sha256: str,
                       failures: list[dict[str, Any]]) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO host_state VALUES (1, ?, ?)",
                       (config_sha256, json.dumps(failures)))


def session_not_found(session_id: str) -> WorkerHostError:
    return WorkerHostError("session_not_found", f"No session named {session_id!r}.")
