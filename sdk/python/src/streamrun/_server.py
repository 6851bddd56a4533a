"""serve(): a handler as a streamrun plugin process."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
from concurrent import futures
from typing import Any, Callable, Optional

import grpc

from . import _handshake, _log
from ._pb import handler_pb2 as pb
from ._pb import handler_pb2_grpc as pb_grpc
from .message import Batch, Info, Outcome, _fill_result

log = logging.getLogger("streamrun")

#: The largest gRPC message either way, as the Go host's default: a batch
#: of Pulsar's largest messages fits, where gRPC's default 4 MiB would not.
DEFAULT_MAX_MESSAGE_SIZE = 64 << 20

#: How long a process whose handler raised lives on, so that the answer
#: telling the host reaches it; the host kills it as soon as it reads it.
CRASH_EXIT_DELAY = 1.0

#: How long Close and the go-plugin controller's Shutdown wait for calls
#: in progress before the process exits.
SHUTDOWN_GRACE = 2.0


#: Exceptions that end the process as a crash rather than fail a message:
#: an interpreter out of memory may be broken anywhere, and SystemExit and
#: KeyboardInterrupt ask for the end. (They are what `except Exception`
#: does not take, and MemoryError.)
_CRASHES = (MemoryError,)


def _describe(exc: BaseException) -> str:
    """An exception as a reason: its type and text, valid UTF-8."""
    return f"{type(exc).__name__}: {exc}".encode("utf-8", "replace").decode("utf-8")


def _panic(exc: BaseException, index: int) -> pb.Panic:
    value = f"{type(exc).__name__}: {exc}"
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    # Strings in the contract are UTF-8; an exception's text need not be.
    return pb.Panic(index=index, value=value.encode("utf-8", "replace").decode("utf-8"),
                    stack=stack.encode("utf-8", "replace").decode("utf-8"))


class _Handler:
    """A user's handler in the shape the server calls."""

    def __init__(self, handler: Any, batch: Optional[bool], init: Optional[Callable], close: Optional[Callable]):
        self.init = init or getattr(handler, "init", None)
        self.close = close or getattr(handler, "close", None)
        if batch is None:
            batch = getattr(handler, "_streamrun_batch", False)
        if hasattr(handler, "handle_batch"):
            self.fn, self.batch = handler.handle_batch, True
        elif hasattr(handler, "handle"):
            self.fn, self.batch = handler.handle, bool(batch)
        elif callable(handler):
            self.fn, self.batch = handler, bool(batch)
        else:
            raise TypeError(f"serve: {handler!r} is not a handler: want a function, or an object with "
                            "handle(message) or handle_batch(batch)")

    def process(self, msgs, deadline: Optional[float], out: pb.BatchResult, traceparent: str = "",
                tracestate: str = "", state: Any = None) -> Optional[pb.Panic]:
        """Runs the handler over a batch, filling out's results. An
        exception raised for a message is that message's error (a retry
        under the pipeline's error policy, with the exception as reason),
        and one raised by a batch handler the whole batch's, as an error
        returned is in the Go SDK. Returns the panic when the handler
        crashed (_CRASHES, or what is not an Exception); out has no results
        then, nor when the deadline passed first."""
        b = Batch(msgs, deadline, traceparent, tracestate, state)
        try:
            ok = self._batch(b, out) if self.batch else self._each(b, out)
            if ok and b._state is not None:
                b._state.settle(b._msgs, out.results)
        except _CRASHES as e:
            del out.results[:]
            return _panic(e, b.current)
        except Exception as e:  # noqa: BLE001 - a batch handler's: the batch's error
            del out.results[:]
            reason = _describe(e)
            for i in range(len(b)):
                out.results.add(index=i, outcome=pb.OUTCOME_RETRY, reason=reason)
            log.warning("handler raised; every message of the batch will be retried",
                        exc_info=True, extra={"messages": len(b)})
            ok = True
        except BaseException as e:  # noqa: BLE001 - SystemExit and the like: a crash
            del out.results[:]
            return _panic(e, b.current)
        if not ok:
            del out.results[:]
        return None

    def _each(self, b: Batch, out: pb.BatchResult) -> bool:
        fn, deadline = self.fn, b.deadline
        add = out.results.add
        now = time.monotonic
        failed = 0
        for m in b._msgs:
            if deadline is not None and now() > deadline:
                return False
            b.current = m.index
            r = add(index=m.index)
            try:
                try:
                    ret = fn(m)
                except Outcome as o:
                    ret = o
                _fill_result(r, ret)
                if r.outcome != pb.OUTCOME_ACK and b._state is not None:
                    b._state.undo(m)
            except _CRASHES:
                raise
            except Exception as e:  # noqa: BLE001 - the message's error, as a Go MessageFunc's
                if b._state is not None:
                    b._state.undo(m)
                r.Clear()
                r.index, r.outcome, r.reason = m.index, pb.OUTCOME_RETRY, _describe(e)
                failed += 1
                if failed == 1:
                    first = (m, e)
        b.current = -1
        if failed:
            m, e = first
            # One record a batch: the first exception's traceback, and how
            # many messages raised.
            log.warning("handler raised; the message will be retried", exc_info=(type(e), e, e.__traceback__),
                        extra={"index": m.index, "message_id": m.id, "raised": failed, "messages": len(b)})
        return True

    def _batch(self, b: Batch, out: pb.BatchResult) -> bool:
        try:
            ret = self.fn(b)
            if ret is not None:
                raise TypeError(f"the batch handler returned a {type(ret).__name__}; want None "
                                "(answer on the Batch)")
        except Outcome as o:
            # The whole batch gets the outcome, as a Go handler's error
            # retries the whole batch.
            for i in range(len(b)):
                o._fill(out.results.add(index=i))
            return True
        if b.deadline is not None and time.monotonic() > b.deadline:
            return False
        for i in range(len(b)):
            r = out.results.add(index=i)
            o = b._outcomes[i]
            if o is not None:
                o._fill(r)
            else:
                r.outcome = pb.OUTCOME_ACK
                for x in b._outputs[i] or ():
                    x._fill(r.outputs.add())
        return True


class _Servicer(pb_grpc.HandlerServicer):
    def __init__(self, h: _Handler, stop: Callable[[], None]):
        self.h = h
        self.stop = stop
        self.crashed: Optional[pb.Panic] = None
        self.lock = threading.Lock()  # one batch at a time, as a Go plugin's default
        self.keyed = False  # the pipeline keeps keyed state (InitRequest.keyed_state)

    def Init(self, request: pb.InitRequest, context: grpc.ServicerContext) -> pb.InitResponse:
        if request.contract_version != _handshake.CONTRACT_VERSION:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          f"the host speaks contract version {request.contract_version}, "
                          f"this plugin speaks {_handshake.CONTRACT_VERSION}")
        if self.h.init is not None:
            try:
                cfg = json.loads(request.config) if request.config.strip() else None
                info = Info(pipeline=request.pipeline, instance_id=request.instance_id, config=cfg,
                            config_json=request.config)
                self.h.init(info)
            except Exception as e:  # noqa: BLE001 - a refusal, told to the host
                log.error("handler init failed", exc_info=True)
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{type(e).__name__}: {e}")
        self.keyed = request.keyed_state
        # This SDK reads and writes keyed state, said either way, so that a
        # host can tell it from an older one.
        return pb.InitResponse(contract_version=_handshake.CONTRACT_VERSION, keyed_state=True)

    def Close(self, request: pb.CloseRequest, context: grpc.ServicerContext) -> pb.CloseResponse:
        if self.h.close is not None:
            try:
                self.h.close()
            except Exception as e:  # noqa: BLE001
                log.error("handler close failed", exc_info=True)
                context.abort(grpc.StatusCode.UNKNOWN, f"{type(e).__name__}: {e}")
        return pb.CloseResponse()

    def Batches(self, request_iterator, context: grpc.ServicerContext):
        for batch in request_iterator:
            deadline = time.monotonic() + batch.timeout_ms / 1000 if batch.timeout_ms > 0 else None
            with self.lock:
                if self.crashed is not None:
                    # Not this batch's exception: it names no message of it.
                    yield pb.BatchResult(seq=batch.seq, panic=pb.Panic(index=-1, value=self.crashed.value,
                                                                        stack=self.crashed.stack))
                    continue
                out = pb.BatchResult(seq=batch.seq)
                # The batch's own trace context, once the contract carries
                # it (read by name: generated code without it still runs).
                p = self.h.process(batch.messages, deadline, out, getattr(batch, "traceparent", ""),
                                   getattr(batch, "tracestate", ""), batch.state if self.keyed else None)
            if p is not None:
                self._crash(p, batch)
                yield pb.BatchResult(seq=batch.seq, panic=p)
            elif len(out.results) == len(batch.messages):
                # Else the deadline passed: the host has given up on the
                # batch, and an answer now could only contradict it.
                yield out

    def _crash(self, p: pb.Panic, batch: pb.Batch) -> None:
        extra: dict = {"panic": p.value}
        if 0 <= p.index < len(batch.messages):
            extra.update(index=p.index, message_id=batch.messages[p.index].id)
        extra["stack"] = p.stack
        log.error("handler raised; the plugin exits", extra=extra)
        with self.lock:
            first = self.crashed is None
            self.crashed = p
        if first:
            t = threading.Timer(CRASH_EXIT_DELAY, lambda: os._exit(2))
            t.daemon = True
            t.start()


def _unary(fn: Callable[[bytes], bytes]) -> grpc.RpcMethodHandler:
    # Raw bytes in and out: these services' messages are tiny and fixed.
    return grpc.unary_unary_rpc_method_handler(lambda req, ctx: fn(req),
                                               request_deserializer=None, response_serializer=None)


def _plumbing(shutdown: Callable[[], None]) -> list:
    """The services go-plugin's host uses besides the handler's own."""
    # grpc.health.v1.Health/Check: HealthCheckResponse{status: SERVING},
    # field 1 varint 1, for any service name ("plugin" is the one asked).
    health = grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health", {"Check": _unary(lambda req: b"\x08\x01")})

    def stop(_req: bytes) -> bytes:
        shutdown()
        return b""  # google.protobuf.Empty

    controller = grpc.method_handlers_generic_handler("plugin.GRPCController", {"Shutdown": _unary(stop)})
    return [health, controller]


def serve(handler: Any, *, batch: Optional[bool] = None, init: Optional[Callable[[Info], None]] = None,
          close: Optional[Callable[[], None]] = None, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
    """Runs handler as a streamrun handler plugin until the host stops it,
    then exits the process. Call it from the script the pipeline names.

    handler is one of:

    - a function of one Message, returning None (ack), an Output or a list
      of Outputs (ack once they are published), or Retry, DeadLetter or
      Drop (which it may also raise);
    - with batch=True, a function of a Batch that answers on it per message
      (Batch.output, retry, dead_letter, drop); raising Retry, DeadLetter
      or Drop gives every message of the batch that outcome;
    - an object with handle(message) or handle_batch(batch), and optionally
      init(info) and close().

    init(info) runs once before the first batch with the pipeline's
    handler config; an exception refuses the start (the host reports it and
    does not retry). close() runs on a graceful stop. Any other exception
    a message function raises is that message's error, as an error
    returned is for a Go MessageFunc: the message is retried under the
    pipeline's error policy (max_retries, then the dead-letter topic) with
    the exception as the reason, and the process goes on; one a batch
    handler raises retries its whole batch. MemoryError, SystemExit and
    KeyboardInterrupt are crashes, as a panic is for a Go handler: the
    host is told the message being handled and the traceback, this process
    exits, and the host retries the batch on a fresh one.
    """
    h = _Handler(handler, batch, init, close)
    _handshake.refuse_unless_hosted()
    # stdout carries the handshake line (claimed already when the package
    # was imported in a plugin process); print() goes to stderr.
    real_stdout = _handshake.claim_stdout()
    _log.setup(sys.stderr)

    version = _handshake.negotiate_version()
    path = _handshake.socket_path()
    done = threading.Event()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="streamrun"),
        options=[("grpc.max_receive_message_length", max_message_size),
                 ("grpc.max_send_message_length", max_message_size),
                 ("grpc.so_reuseport", 0)],
    )

    def shutdown() -> None:
        done.set()

    servicer = _Servicer(h, shutdown)
    pb_grpc.add_HandlerServicer_to_server(servicer, server)
    server.add_generic_rpc_handlers(_plumbing(shutdown))

    client_cert = os.environ.get("PLUGIN_CLIENT_CERT", "")
    cert = None
    if client_cert:
        cert = _handshake.make_server_cert()
        creds = grpc.ssl_server_credentials([(cert.key_pem, cert.cert_pem)],
                                            root_certificates=client_cert.encode(), require_client_auth=True)
        port = server.add_secure_port("unix:" + path, creds)
    else:
        port = server.add_insecure_port("unix:" + path)
    if port == 0:
        raise _handshake.HandshakeError(f"cannot listen on unix socket {path}")
    _handshake.share_socket(path)
    server.start()

    line = _handshake.handshake_line(version, path, cert) + "\n"
    os.write(real_stdout, line.encode())
    os.close(real_stdout)

    # The host's Ctrl-C reaches its whole process group; the host, not the
    # terminal, decides when a plugin stops (go-plugin does the same).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: shutdown())
    try:
        while not done.wait(0.5):
            pass
    finally:
        server.stop(SHUTDOWN_GRACE).wait()
        try:
            os.unlink(path)
        except OSError:
            pass
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)


def batch_handler(fn: Callable[[Batch], None]) -> Callable[[Batch], None]:
    """Marks fn as a batch handler, so that serve(fn) gives it Batches."""
    fn._streamrun_batch = True  # type: ignore[attr-defined]
    return fn

