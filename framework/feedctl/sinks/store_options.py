"""The options of an object store's filesystem (s3fs, gcsfs, adlfs), from three places, the first that names
a value winning: the sink's `storage_options`, the URI's query parameters (CockroachDB's names, such as
`AWS_ACCESS_KEY_ID`), then the standard environment variables of each cloud.

The driver resolves them once and hands the result to the executors, so a Spark worker started before an
environment variable was set still writes where the driver would.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlsplit

# URI parameters and upper-case storage_options keys → the filesystem's own argument names.
_PARAMS = {
    "s3": {
        "AWS_ACCESS_KEY_ID": "key",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_SESSION_TOKEN": "token",
        "AWS_ENDPOINT": "endpoint_url",
        "AWS_ENDPOINT_URL": "endpoint_url",
        "AWS_REGION": "region",
    },
    "gs": {"CREDENTIALS": "credentials", "AUTH": "auth"},
    "az": {
        "AZURE_ACCOUNT_NAME": "account_name",
        "AZURE_ACCOUNT_KEY": "account_key",
        "AZURE_CLIENT_ID": "client_id",
        "AZURE_CLIENT_SECRET": "client_secret",
        "AZURE_TENANT_ID": "tenant_id",
        "AZURE_CONNECTION_STRING": "connection_string",
    },
}
# Environment variables → argument names; the first variable set of each argument wins.
_ENV = {
    "s3": [
        ("AWS_ENDPOINT_URL_S3", "endpoint_url"),
        ("AWS_ENDPOINT_URL", "endpoint_url"),
        ("AWS_ACCESS_KEY_ID", "key"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_SESSION_TOKEN", "token"),
        ("AWS_REGION", "region"),
        ("AWS_DEFAULT_REGION", "region"),
    ],
    "gs": [("STORAGE_EMULATOR_HOST", "endpoint_url"), ("GOOGLE_APPLICATION_CREDENTIALS", "token")],
    "az": [
        ("AZURE_STORAGE_CONNECTION_STRING", "connection_string"),
        ("AZURE_STORAGE_ACCOUNT_NAME", "account_name"),
        ("AZURE_STORAGE_ACCOUNT_KEY", "account_key"),
        ("AZURE_STORAGE_SAS_TOKEN", "sas_token"),
        ("AZURE_STORAGE_CLIENT_ID", "client_id"),
        ("AZURE_STORAGE_CLIENT_SECRET", "client_secret"),
        ("AZURE_STORAGE_TENANT_ID", "tenant_id"),
    ],
}
# Query parameters that are sink options, not credentials.
_SINK_PARAMS = {"file_size", "partition_format", "topic_prefix", "S3_STORAGE_CLASS"}


def protocol(uri: str) -> str:
    """The fsspec protocol of a cloud-storage URI: `s3`, `gs` or `az` (for both `azure://` and `az://`)."""
    scheme = uri.split("://", 1)[0].lower()
    return "az" if scheme in ("azure", "az", "abfs") else scheme


def filesystem_options(uri: str, storage_options: Mapping[str, str] | None, environ: Mapping[str, str]) -> dict:
    """Keyword arguments for `fsspec.filesystem(protocol(uri), ...)`."""
    kind = protocol(uri)
    names = _PARAMS.get(kind, {})
    chosen: dict = {}
    for key, value in (storage_options or {}).items():
        chosen[names.get(key, key)] = value
    for key, value in parse_qsl(urlsplit(uri).query):
        if key not in _SINK_PARAMS:
            chosen.setdefault(names.get(key, key), value)
    for variable, name in _ENV.get(kind, []):
        if environ.get(variable):
            chosen.setdefault(name, environ[variable])
    return _shaped(kind, chosen)


def _shaped(kind: str, options: dict) -> dict:
    out = dict(options)
    if kind == "s3" and "region" in out:
        out["client_kwargs"] = {**out.get("client_kwargs", {}), "region_name": out.pop("region")}
    if kind == "gs":
        auth, credentials = out.pop("auth", None), out.pop("credentials", None)
        if credentials:  # CockroachDB's CREDENTIALS: a service account key, base64-encoded JSON
            out["token"] = json.loads(base64.b64decode(credentials))
        elif auth == "implicit":
            out.pop("token", None)
        endpoint = out.get("endpoint_url")
        if endpoint and not endpoint.startswith("http"):
            out["endpoint_url"] = f"http://{endpoint}"
        if endpoint and "token" not in out:
            out["token"] = "anon"  # an emulator takes no credentials
    return out


def root_path(uri: str) -> str:
    """`bucket/prefix` of `s3://bucket/prefix?...`: where the sink's objects live, without a trailing `/`."""
    return uri.split("://", 1)[1].split("?", 1)[0].rstrip("/")
