"""Text from elsewhere (op names, converter errors, file names) placed safely in Markdown: in a fenced block
whose fence is longer than any backtick run inside it, so nothing in the text can close it; in an inline code
span the same way; and in prose or a table cell with `<`, `&`, `|` and backticks made inert, so a name such as
`<img src=x onerror=...>` is shown, never rendered. Pure string functions; they never shorten or drop text."""

from __future__ import annotations

import re

_BACKTICKS = re.compile(r"`+")


def _longest_run(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def fence(text: str, info: str = "") -> list[str]:
    """The lines of a fenced code block holding `text` verbatim (CommonMark: a closing fence must be at least as
    long as the opening one, so a longer fence than any run inside cannot be closed by the text)."""
    marks = "`" * max(3, _longest_run(text) + 1)
    return [marks + info, *str(text).splitlines(), marks]


def code(text: str) -> str:
    """An inline code span holding `text` on one line, whatever backticks it contains."""
    text = " ".join(str(text).split())
    marks = "`" * (_longest_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{marks}{pad}{text}{pad}{marks}"


def prose(text: str) -> str:
    """`text` on one line as inert Markdown prose: no HTML (`<`, `&` as entities), no code span (backticks as
    `'`), no table column break (`\\|`)."""
    text = " ".join(str(text).split())
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace("`", "'").replace("|", "\\|"))
