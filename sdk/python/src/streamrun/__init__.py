"""streamrun: write stream handlers in Python.

A handler is a script that calls ``streamrun.serve`` with a function; the
streamrun host runs it as a plugin process, sends it batches of messages
from a subscription and publishes what it answers::

    import streamrun

    def upper(m: streamrun.Message):
        return streamrun.Output(topic="persistent://public/default/upper",
                                key=m.key, payload=m.payload.upper())

    streamrun.serve(upper)

The pipeline file names the script (handler.script) and the interpreter or
virtual environment to run it with (handler.python). See the package
README for outcomes, batch handlers, JSON, logs and crashes.
"""

from ._handshake import CONTRACT_VERSION, check_cookie, claim_stdout
from ._server import DEFAULT_MAX_MESSAGE_SIZE, batch_handler, serve
from .jsonhelper import Emit, json_handler
from .message import Batch, DeadLetter, Drop, Info, Message, Outcome, Output, Retry
from .state import NoState, State
from .window import Window, WindowMessage, incremental_window

# In a plugin process, stdout is the handshake's from the moment the
# package is imported: a print() before serve() would otherwise be read by
# the host as a broken handshake.
if check_cookie():
    claim_stdout()

__all__ = [
    "incremental_window",
    "CONTRACT_VERSION",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "Batch",
    "DeadLetter",
    "Drop",
    "Emit",
    "Info",
    "Message",
    "NoState",
    "Outcome",
    "Output",
    "Retry",
    "State",
    "Window",
    "WindowMessage",
    "batch_handler",
    "json_handler",
    "serve",
]
