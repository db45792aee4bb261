"""Redaction of secrets from anything feedctl writes or prints: target/, logs, `feedctl jobs`."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from feedctl.project.env_vars import REDACTED

# URI parameters and option names that carry credentials (CockroachDB's sink parameters and common ones).
_SECRET_NAME = re.compile(
    r"(password|passwd|secret|token|credential|api_key|access_key|account_key|(?:^|_)sas(?:_|$)|"
    r"client_key|auth|shared_access_key|private_key)",
    re.IGNORECASE,
)


# Where env_var() may be used: the settings of connections and credentials, whose values feedctl shows
# redacted. `str` stands for any key, `int` for any index, `...` for anything below.
_SECRET_PLACES = {
    "project": [
        ("state",),
        ("staging",),
        ("spark", "master"),
        ("spark", "remote"),
        ("spark", "conf", str),
        ("metrics", str),
        ("vars", ...),
        ("sources", int, "storage_options", str),
        ("sources", int, "tables", int, "path"),
        ("sources", int, "tables", int, "storage_options", str),
    ],
    "sinks": [("sinks", int, "uri"), ("sinks", int, "options", ...)],
}
SECRET_PLACES = (
    "env_var() in a connection setting: project.yml's state, staging, spark master, remote and conf, metrics, "
    "vars, a table's path and storage_options; a sink's uri and options"
)


def secret_allowed(kind: str, path: tuple) -> bool:
    """Whether a value at `path` of a `kind` file (project, sinks, feeds) may come from env_var()."""
    return any(_matches(pattern, path) for pattern in _SECRET_PLACES.get(kind, ()))


def _matches(pattern: tuple, path: tuple) -> bool:
    for i, part in enumerate(pattern):
        if part is ...:
            return True
        if i >= len(path) or not (
            path[i] == part if isinstance(part, str) else isinstance(path[i], part) and not isinstance(path[i], bool)
        ):
            return False
    return len(path) == len(pattern)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def redact_uri(uri: str) -> str:
    """Hide the password of `user:password@host` and secret query parameters; of a URI that does not parse,
    all but its scheme."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return f"{uri.split('://', 1)[0]}://{REDACTED}" if "://" in uri else REDACTED
    if not parts.query and "@" not in parts.netloc:
        return uri  # nothing to hide; urlunsplit would also drop the empty host of sqlite:///x
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            netloc = f"{userinfo.split(':', 1)[0]}:{REDACTED}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, REDACTED if is_secret_name(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


_PREFIX = 12  # a long secret's first characters are redacted wherever they show: a message shortened it


def scrub_text(text: str, secret_values) -> str:
    """`text` with every secret value (what env_var() returned) replaced by the redaction mark, and what
    remains of a long one that a message cut short (its first characters, up to where they stop matching)."""
    for value in sorted({v for v in secret_values if len(v) >= 4}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
        if len(value) >= _PREFIX:
            start = text.find(value[:_PREFIX])
            while start >= 0:
                end = start + _PREFIX
                while end < len(text) and end - start < len(value) and text[end] == value[end - start]:
                    end += 1
                text = text[:start] + REDACTED + text[end:]
                start = text.find(value[:_PREFIX], start + len(REDACTED))
    return text


def scrub(diagnostics, secret_values):
    """Diagnostics with every secret value replaced by the redaction mark."""
    from dataclasses import replace

    return [
        replace(
            d,
            message=scrub_text(d.message, secret_values),
            expected=scrub_text(d.expected, secret_values),
            hint=scrub_text(d.hint, secret_values),
        )
        for d in diagnostics
    ]


def redact_mapping(value):
    """A copy of nested options with values under secret-looking names hidden."""
    if isinstance(value, dict):
        return {
            k: REDACTED if is_secret_name(k) and not isinstance(v, (dict, list)) else redact_mapping(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_mapping(v) for v in value]
    return value
