"""What the stores say to a user: database URLs with their passwords masked, and every database failure as the
one-line `StoreError` text naming the database and the fix. Both stores (deploytool.store.sqlite and
deploytool.store.sqlalchemy) word their errors through here, so a failure reads the same whichever one met it."""

from __future__ import annotations

import re

from deploytool.errors import first_line_of

URL_HINT = "use sqlite:///path/results.db or postgresql+psycopg://user:pass@host/db"
SQLITE_BUSY_TIMEOUT_S = 30  # how long a writer waits for another process's write on the same SQLite file

# `user:secret@` in anything that looks like a URL, and libpq secrets passed as query parameters. Greedy up to
# the last "@": a password with an unescaped "@" in it is still masked whole, even where SQLAlchemy misparses it.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][\w+.-]*://[^:/@?#\s]*):(?P<pw>.*)@")
_BARE_USERINFO = re.compile(r"^(?P<head>[^:/@?#\s]*):(?P<pw>.*)@")  # "user:pass@host/db", the scheme forgotten
_QUERY_SECRET = re.compile(r"(?i)(?P<head>[?&](?:password|sslpassword)=)[^&#\s]*")

# What a database failure means for the user, by the driver's message: (pattern, fix), first match wins.
_FIXES = tuple((re.compile(p, re.IGNORECASE), fix) for p, fix in (
    (r"readonly database|read-only|read only",
     "it is read-only here (a read-only file or folder, or a read-only server): make it writable for this user, "
     "or pass --db with a writable location"),
    (r"unable to open database file",
     "its folder does not exist or cannot be written: create it or make it writable, or pass --db elsewhere"),
    (r"file is not a database|file is encrypted",
     "that file is not a SQLite database: move it away, or pass --db with another path"),
    (r"disk is full|no space left|could not extend file|disk full",
     "the disk holding it is full: free some space and run again (the rows measured so far are kept)"),
    (r"database is locked",
     f"another process held it locked for over {SQLITE_BUSY_TIMEOUT_S} s: wait for that process, or give "
     "concurrent lab hosts a PostgreSQL --db"),
    (r"value too long|right truncation",
     "a name or run id is longer than its column allows: shorten it, or let the database owner widen the column"),
    (r'(database|role) "[^"]*" does not exist|password authentication failed',
     "the server has no such database or user, or refused the password: fix --db / DEPLOYTOOL_DB, or create the "
     "database first"),
    (r"permission denied|must be owner",
     "the database user lacks rights on deploytool's tables (runs, results): grant them, or use another --db"),
    (r"no such (table|column)|(relation|column) .* does not exist",
     "its tables are not the ones deploytool made: point --db / DEPLOYTOOL_DB at deploytool's own database"),
))
_FIX_DEFAULT = "check --db / DEPLOYTOOL_DB and that the server is running and reachable"


def mask_in_text(text: str) -> str:
    return _QUERY_SECRET.sub(r"\g<head>***", _USERINFO.sub(r"\g<head>:***@", str(text)))


def mask_url(url: str) -> str:
    """`url` with its password replaced by ***; works on URLs that do not parse, even without a scheme."""
    url = str(url)
    return mask_in_text(url if "://" in url else _BARE_USERINFO.sub(r"\g<head>:***@", url))


def typed_secrets(url: str) -> list[str]:
    """The passwords in `url` as typed: in its user info (and, for a URL that does not parse, the pieces around
    an unescaped "@") and in libpq query parameters."""
    typed = [m.group("pw") for m in (_USERINFO if "://" in url else _BARE_USERINFO).finditer(url)]
    return typed + [m.group(0).split("=", 1)[1] for m in _QUERY_SECRET.finditer(url)]


def scrub(e: BaseException, secrets: list[str]) -> str:
    """The first line of an error's message with any password in it masked."""
    text = str(e)
    line = first_line_of(text, len(text)) or type(e).__name__
    for s in secrets:
        line = line.replace(s, "***")
    return mask_in_text(line)


def explain(doing: str, url: str, line: str) -> str:
    """The one-line StoreError text: what failed, on which database (`url`, masked), the driver's `line`
    (scrubbed) and the fix it points to."""
    fix = next((fix for pattern, fix in _FIXES if pattern.search(line)), _FIX_DEFAULT)
    return f"{doing} the results database {url}: {line}; {fix}"
