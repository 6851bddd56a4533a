"""A host for the SDK's tests: it starts a plugin script the way a
streamrun host does (go-plugin's environment, its own certificate for
mTLS), reads the handshake line and connects over the Unix socket."""

from __future__ import annotations

import base64
import datetime
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from streamrun._pb import handler_pb2 as pb
from streamrun._pb import handler_pb2_grpc as pb_grpc

PLUGINS = Path(__file__).parent / "plugins"
COOKIE = ("STREAMRUN_PLUGIN_COOKIE", "3f0b7c1e-streamrun-handler")
WAIT = 30  # seconds: every wait of a test is bounded


def host_cert():
    """The host's certificate and key (PEM), as a streamrun host makes."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


@dataclass
class Plugin:
    proc: subprocess.Popen
    line: str
    channel: grpc.Channel
    stub: pb_grpc.HandlerStub
    stderr: list
    server_pem: bytes

    def batches(self, batches, timeout=WAIT):
        """Sends batches on one Batches stream, returns the answers."""
        return list(self.stub.Batches(iter(batches), timeout=timeout))

    def raw(self, method: str, req: bytes = b"") -> bytes:
        return self.channel.unary_unary(method)(req, timeout=WAIT)

    def wait(self) -> int:
        return self.proc.wait(WAIT)

    def stderr_text(self) -> str:
        return "\n".join(self.stderr)

    def records(self, msg: str, n: int = 1) -> list:
        """The plugin's log records (JSON lines on its stderr) whose msg is
        msg, once there are n of them (stderr is read by a thread of its
        own); fails after WAIT seconds."""
        deadline = time.monotonic() + WAIT
        while True:
            recs = [json.loads(l) for l in list(self.stderr) if l.startswith("{")]
            found = [r for r in recs if r.get("msg") == msg]
            if len(found) >= n:
                return found
            assert time.monotonic() < deadline, f"no {n} records {msg!r} in:\n{self.stderr_text()}"
            time.sleep(0.01)


def start_plugin(script: str, *args: str, env: Optional[dict] = None, tmp: Path) -> Plugin:
    cert_pem, key_pem = host_cert()
    e = dict(os.environ)
    e.update({COOKIE[0]: COOKIE[1], "PLUGIN_PROTOCOL_VERSIONS": "1", "PLUGIN_CLIENT_CERT": cert_pem.decode(),
              "PLUGIN_UNIX_SOCKET_DIR": str(tmp), "STREAMRUN_PLUGIN_LOG_LEVEL": "DEBUG"})
    e.update(env or {})
    proc = subprocess.Popen([sys.executable, str(PLUGINS / script), *args], env=e, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr: list = []
    threading.Thread(target=lambda: stderr.extend(l.rstrip("\n") for l in proc.stderr), daemon=True).start()
    line = proc.stdout.readline().strip()
    assert line, f"no handshake line; stderr: {stderr}"
    parts = line.split("|")
    assert parts[:3] == ["1", "1", "unix"] and parts[4] == "grpc", line
    der = base64.b64decode(parts[5] + "=" * (-len(parts[5]) % 4))
    server_pem = x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)
    creds = grpc.ssl_channel_credentials(root_certificates=server_pem, private_key=key_pem,
                                         certificate_chain=cert_pem)
    ch = grpc.secure_channel("unix:" + parts[3], creds, options=[("grpc.ssl_target_name_override", "localhost")])
    grpc.channel_ready_future(ch).result(timeout=WAIT)
    return Plugin(proc, line, ch, pb_grpc.HandlerStub(ch), stderr, server_pem)


@pytest.fixture
def plugin(tmp_path):
    started = []

    def start(script="echo.py", *args, **kw):
        p = start_plugin(script, *args, tmp=tmp_path, **kw)
        started.append(p)
        return p

    yield start
    for p in started:
        p.channel.close()
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait(WAIT)


def init(p: Plugin, config: bytes = b'{"output": "persistent://public/default/out"}') -> pb.InitResponse:
    return p.stub.Init(pb.InitRequest(config=config, pipeline="pipe", instance_id="0", contract_version=1),
                       timeout=WAIT)


def message(i: int, payload: bytes, key: bytes = b"", props=None, **kw) -> pb.Message:
    m = pb.Message(id=f"1:{i}:-1:-1", topic="persistent://public/default/in", key=key, payload=payload, **kw)
    for k, v in (props or {}).items():
        e = m.properties.add()
        e.key, e.value = k, v
    return m
