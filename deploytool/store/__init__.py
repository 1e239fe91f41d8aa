"""The results database: a SQLite file in the workspace by default (deploytool.store.sqlite, through Python's
own sqlite3), any other URL — PostgreSQL for a lab of several hosts, SQLite with options — through SQLAlchemy
(deploytool.store.sqlalchemy, which imports SQLAlchemy only when such a store is opened). The two are siblings:
both are `ResultStore`s (deploytool.store.protocol) keeping the tables and rows of deploytool.store.rows and
handing back `Result`s, `RunRecord`s and `Finding`s (deploytool.store.records); `open_store` picks one."""

from __future__ import annotations

import os

from deploytool.store.messages import mask_url
from deploytool.store.protocol import ResultStore
from deploytool.store.records import Finding, RunRecord
from deploytool.store.sqlalchemy import SqlAlchemyStore
from deploytool.store.sqlite import SqliteStore, sqlite_target

__all__ = ["Finding", "ResultStore", "RunRecord", "SqlAlchemyStore", "SqliteStore", "mask_url", "open_store"]


def open_store(url: str | None, default_url: str) -> ResultStore:
    """The store at `url` (else $DEPLOYTOOL_DB, else the workspace's SQLite file): a plain SQLite file through
    the standard library (SQLAlchemy is never imported for it), anything else through SQLAlchemy."""
    url = url or os.environ.get("DEPLOYTOOL_DB") or default_url
    return SqliteStore(url) if sqlite_target(url) is not None else SqlAlchemyStore(url)
