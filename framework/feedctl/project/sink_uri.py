"""What kind of sink a URI names, and where a `file://` sink lives."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

# scheme -> (sink kind, Python module its backend needs or None)
SCHEMES: dict[str, tuple[str, str | None]] = {
    "file": ("cloudstorage", None),
    "s3": ("cloudstorage", "s3fs"),
    "gs": ("cloudstorage", "gcsfs"),
    "azure": ("cloudstorage", "adlfs"),
    "az": ("cloudstorage", "adlfs"),
    "kafka": ("kafka", "confluent_kafka"),
    "webhook-https": ("webhook", None),
    "webhook-http": ("webhook", None),
    "null": ("null", None),
}


def scheme_of(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else ""


def sink_kind(uri: str) -> str | None:
    entry = SCHEMES.get(scheme_of(uri))
    return entry[0] if entry else None


def local_path(uri: str, project_root: Path) -> Path | None:
    """The folder of a `file://` sink; `file://target/x` is relative to the project, `file:///x` absolute."""
    if scheme_of(uri) != "file":
        return None
    rest = uri.split("://", 1)[1]
    rest = urlsplit("file://" + rest).path if rest.startswith("/") else rest.split("?", 1)[0]
    path = Path(rest)
    return path if path.is_absolute() else project_root / path
