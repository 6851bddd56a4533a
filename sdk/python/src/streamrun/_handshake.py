"""The go-plugin handshake, as hashicorp/go-plugin's host expects it from
a plugin served over gRPC.

1. The host sets a magic cookie in the child's environment; a plugin
   started without it says it is a plugin and exits 1.
2. PLUGIN_PROTOCOL_VERSIONS lists the application protocol versions the
   host speaks (streamrun's contract versions); the plugin picks one.
3. The plugin listens on a Unix socket (in PLUGIN_UNIX_SOCKET_DIR, else
   the temp directory; group-writable for PLUGIN_UNIX_SOCKET_GROUP).
4. AutoMTLS: the host passes its certificate (PEM) in PLUGIN_CLIENT_CERT.
   The plugin makes a self-signed certificate of its own for "localhost",
   serves TLS with it, accepts only clients presenting the host's
   certificate, and sends its certificate's DER, base64 without padding,
   in the handshake line.
5. The handshake line, on stdout:
   CORE-VERSION|APP-VERSION|NETWORK|ADDRESS|PROTOCOL|SERVER-CERT
   e.g. "1|1|unix|/tmp/plugin123|grpc|MIIB...".
"""

from __future__ import annotations

import base64
import datetime
import grp
import os
import secrets
import sys
import tempfile
from dataclasses import dataclass
from typing import Optional

#: The cookie a streamrun host sets (docs/handlers-any-language.md).
COOKIE_KEY = "STREAMRUN_PLUGIN_COOKIE"
COOKIE_VALUE = "3f0b7c1e-streamrun-handler"
#: go-plugin's own protocol version, the line's first field.
CORE_PROTOCOL_VERSION = 1
#: The handler contract version this SDK speaks (plugin/proto/handler.proto).
CONTRACT_VERSION = 1

NOT_A_PLUGIN = (
    "This program is a streamrun handler plugin. It is not meant to be run directly:\n"
    "name it in a pipeline file (handler.script) and run the pipeline with streamrun.\n"
)


class HandshakeError(Exception):
    """The host's environment does not let this plugin start."""


def check_cookie(env: Optional[dict] = None) -> bool:
    env = os.environ if env is None else env
    return env.get(COOKIE_KEY) == COOKIE_VALUE


def negotiate_version(env: Optional[dict] = None) -> int:
    """The contract version to serve. This SDK speaks one; as go-plugin's
    servers do, it answers with it even when the host's list
    (PLUGIN_PROTOCOL_VERSIONS) lacks it, and the host reports the mismatch
    naming both."""
    return CONTRACT_VERSION


def socket_path(env: Optional[dict] = None) -> str:
    """A fresh path for the Unix socket."""
    env = os.environ if env is None else env
    d = env.get("PLUGIN_UNIX_SOCKET_DIR") or tempfile.gettempdir()
    return os.path.join(d, f"plugin{secrets.token_hex(6)}")


def share_socket(path: str, env: Optional[dict] = None) -> None:
    """Makes the socket writable by PLUGIN_UNIX_SOCKET_GROUP, when set."""
    env = os.environ if env is None else env
    group = env.get("PLUGIN_UNIX_SOCKET_GROUP", "")
    if not group:
        return
    gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
    os.chown(path, -1, gid)
    os.chmod(path, 0o660)


@dataclass
class ServerCert:
    cert_pem: bytes
    key_pem: bytes
    cert_der: bytes

    def line_field(self) -> str:
        """The handshake line's last field."""
        return base64.b64encode(self.cert_der).decode("ascii").rstrip("=")


def make_server_cert() -> ServerCert:
    """A self-signed certificate for "localhost", valid for server and
    client auth, as go-plugin makes for its plugins (ECDSA; P-256 here)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([
        x509.NameAttribute(NameOID.COMMON_NAME, "localhost"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "streamrun"),
    ])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(seconds=30))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_encipherment=True, key_agreement=True, key_cert_sign=True,
            content_commitment=False, data_encipherment=False, crl_sign=False,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH]),
                       critical=False)
        .sign(key, hashes.SHA256())
    )
    return ServerCert(
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()),
        cert_der=cert.public_bytes(serialization.Encoding.DER),
    )


def handshake_line(version: int, path: str, cert: Optional[ServerCert]) -> str:
    return "|".join([str(CORE_PROTOCOL_VERSION), str(version), "unix", path, "grpc",
                     cert.line_field() if cert else ""])


_handshake_fd: Optional[int] = None


def claim_stdout() -> int:
    """Keeps the process's stdout for the handshake line and sends every
    other write to it (print, a library's chatter) to stderr, which the
    host logs: a line on stdout before the handshake line would fail the
    start. Idempotent; returns the descriptor of the real stdout."""
    global _handshake_fd
    if _handshake_fd is None:
        sys.stdout.flush()
        _handshake_fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    return _handshake_fd


def refuse_unless_hosted() -> None:
    """Exits 1 with a clear message when not started by a streamrun host."""
    if not check_cookie():
        sys.stderr.write(NOT_A_PLUGIN)
        sys.exit(1)
