"""Parameters of a sink URI, read the way CockroachDB reads them."""

from __future__ import annotations

import base64
from urllib.parse import parse_qsl, urlsplit


def uri_params(uri: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(uri).query))


def truthy(value: str) -> bool:
    return value.lower() in ("true", "1", "yes")


def pem(value: str) -> str:
    """CockroachDB passes certificates base64-encoded in the URI; accept plain PEM too. An unescaped `+`
    arrives as a space: put it back before decoding."""
    if value.lstrip().startswith("-----"):
        return value
    return base64.b64decode(value.replace(" ", "+"), validate=True).decode()
