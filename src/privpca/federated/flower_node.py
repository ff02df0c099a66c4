"""A provider's Flower SuperNode that answers from one long-running process.

Flower 1.41 has no long-running ClientApp: its ``flwr-clientapp`` answers one message and
exits, and the default ``--isolation subprocess`` SuperNode starts one (a fresh Python, Flower's
and privpca's imports, the provider's data) for every message, found by a SuperExec that polls
every second, while the SuperNode itself asks the SuperLink for work every 3 s when it has none.
On localhost that is ~10-20 s per DPS-PCA round, nearly all of it waiting and importing.

:func:`run_provider_node` runs Flower's own SuperNode (``flower-supernode --isolation
process``: Flower starts no executor and serves the tasks on its Runtime API for one that runs
outside it) with, in the same process, :class:`TaskWorker`: a thread that takes each task from
that Runtime API and answers it with privpca's :data:`~privpca.federated.flower_app.client_app`,
already imported, through Flower's own task functions (pull the task's message and context,
push the reply and the task's status), exactly as ``flwr-clientapp`` does but without exiting.
Every answer still goes through :func:`~privpca.federated.flower_app.load_provider`, which
re-reads the provider's state file under its lock for every message: the release counts,
the refusal beyond the agreed T and the values a provider must recall are the same as with a
process per message (only the data array, keyed by the file's identity, is kept in memory).

The worker runs privpca's ClientApp only, never code from the run's Flower App Bundle (FAB): a
run whose FAB names another ClientApp gets an error reply. (The stock SuperNode installs and
imports whatever app the FAB carries, with the provider's node config in reach.)

The waiting: the SuperNode's idle poll (``time.sleep(3)`` in
``flwr.supernode.start_client_internal``, not configurable) and its wait for a reply
(``time.sleep(0.5)``) are shortened by replacing that module's ``time`` with :class:`PollClock`
(the only handle: a module global; :mod:`privpca.federated.flower_shim` is the one module
that touches Flower's internals): it polls every
``poll`` seconds while a run is active and backs off to Flower's 3 s after ``IDLE_AFTER``
seconds without a message, so an idle provider costs the SuperLink what it did before. When
the SuperNode has stored a message (all its objects) and waits for the reply, the clock wakes
the worker at once; otherwise the worker asks the Runtime API every second (Flower's own
SuperExec interval). A message is listed before its contents are uploaded, and Flower retries
such pulls after 1 s: :func:`shorten_pull_backoff` starts those retries at 0.02 s in the
SuperNode (and, from the ServerApp, in the server's grid). Only sleeps change: what is pulled,
stored, answered and pushed is Flower's code and privpca's, as before. If a Flower release
changes these module globals, the patches are skipped (with a warning) and the provider
still works, at Flower's own pace; ``tests/test_federated_flower.py`` checks they apply.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from logging import ERROR, INFO, WARNING
from typing import Any

from privpca.federated.flower_shim import (
    IDLE_AFTER,
    LOCAL_POLL,
    POLL,
    PULL_BACKOFF,
    PollClock,
    patch_supernode_polling,
    shorten_pull_backoff,
)

__all__ = ["IDLE_AFTER", "LOCAL_POLL", "POLL", "PULL_BACKOFF", "PollClock", "TaskWorker",
           "patch_supernode_polling", "run_provider_node", "shorten_pull_backoff"]

#: Seconds between the worker's own polls of the Runtime API (Flower's SuperExec interval).
WORKER_IDLE_POLL = 1.0
#: Seconds between a task's heartbeats (Flower expects one within 30 s, twice over).
HEARTBEAT = 10.0
#: The ClientApp this worker runs; a run whose FAB names another is answered with an error.
CLIENT_APP_REF = "privpca.federated.flower_app:client_app"


def _fab_client_app(fab_content: bytes) -> str | None:
    from flwr.common.config import get_fab_config

    try:
        return str(get_fab_config(fab_content)["tool"]["flwr"]["app"]["components"]["clientapp"])
    except Exception:  # no readable config: not privpca's app
        return None


class TaskWorker:
    """Answers the SuperNode's ClientApp tasks with privpca's ClientApp, one at a time.

    Parameters
    ----------
    address : str
        ``HOST:PORT`` of the SuperNode's Runtime API (its ``--host``/``--port``).
    clock : PollClock
        The schedule of polls (shared with the SuperNode loop, which wakes the worker).
    """

    def __init__(self, address: str, clock: PollClock) -> None:
        self.address, self.clock = address, clock
        self.stop = threading.Event()

    def _client(self, interceptors: Sequence[Any]) -> Any:
        from flwr.supercore.retry import make_simple_http_retry_invoker
        from flwr.supercore.runtime import RuntimeHttpClient

        return RuntimeHttpClient.from_server_address(
            server_address=self.address, insecure=True, root_certificates=None,
            interceptors=list(interceptors), retry_invoker=make_simple_http_retry_invoker())

    def serve(self) -> None:
        """Take and answer tasks until :attr:`stop` is set."""
        from flwr.proto.runtime_pb2 import AcquireTaskRequest
        from flwr.supercore import log
        from flwr.supercore.constant import TaskType
        from flwr.supercore.interceptors import RuntimeVersionHttpInterceptor

        client = self._client([RuntimeVersionHttpInterceptor(component_name="SuperExec")])
        request = AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP])
        log(INFO, "privpca: answering ClientApp tasks in process at %s", self.address)
        try:
            while not self.stop.is_set():
                try:
                    res = client.AcquireTask(request)
                except Exception as exc:  # the Runtime API not up yet, or going down
                    log(WARNING, "privpca: Runtime API not reachable: %r", exc)
                    self.stop.wait(1.0)
                    continue
                if res.HasField("task") and res.token:
                    try:
                        self.run_task(res.token)
                    except Exception as exc:  # reporting failed: keep serving the next ones
                        log(ERROR, "privpca: could not report a ClientApp task: %r", exc)
                    self.clock.activity()
                    continue  # another may be waiting
                # Woken once the SuperNode has stored a message (all its objects): a task
                # taken earlier would wait out Flower's 1 s pull backoff. The timeout is
                # Flower's own SuperExec poll, for a SuperNode that does not wake us.
                self.clock.wake.wait(WORKER_IDLE_POLL)
                self.clock.wake.clear()
        finally:
            client.close()

    def run_task(self, token: str) -> None:
        """One task, as ``flwr-clientapp`` runs it, in this process (no FAB installed)."""
        from flwr.app import Error, Message
        from flwr.common.constant import ErrorCode, SubStatus
        from flwr.supercore import log
        from flwr.supercore.interceptors import (
            RuntimeTokenHttpInterceptor,
            RuntimeVersionHttpInterceptor,
        )
        from flwr.supernode.runtime.run_clientapp import (
            pull_task_input,
            push_message,
            push_task_output,
        )

        from privpca.federated.flower_app import client_app
        from privpca.federated.protocol import failure_reply

        client = self._client([RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
                               RuntimeTokenHttpInterceptor(token)])
        done = threading.Event()
        heartbeat = threading.Thread(target=_heartbeats, args=(client, done), daemon=True)
        heartbeat.start()
        message = context = reply = None
        status, details = SubStatus.FAILED, "ClientApp task failed"
        try:
            message, context, _run, fab = pull_task_input(client)
            app = _fab_client_app(fab.content)
            if app != CLIENT_APP_REF:
                reason = (f"this provider runs only {CLIENT_APP_REF}; the run's app names "
                          f"{app!r}")
                log(WARNING, "privpca: refused a task: %s", reason)
                reply = Message(Error(ErrorCode.LOAD_CLIENT_APP_EXCEPTION, reason),
                                reply_to=message)
                details = reason
            else:
                reply = client_app(message=message, context=context)
                status, details = SubStatus.COMPLETED, ""
        except Exception as exc:  # Flower's transport failed: report it as flwr-clientapp does
            # The provider's log has the error; the server gets a fixed code only (its text
            # could quote what the provider holds, as its own failures can).
            log(ERROR, "privpca: ClientApp task failed: %r", exc)
            number, reason = failure_reply(exc)
            if message is not None:
                reply = Message(Error(number, reason), reply_to=message)
            details = reason
        finally:
            try:
                if reply is not None and context is not None:
                    push_message(client, reply, context)
                push_task_output(client=client, context=context, sub_status=status,
                                 details=details)
            finally:
                done.set()
                heartbeat.join(timeout=HEARTBEAT)
                client.close()


def _heartbeats(client: Any, done: threading.Event) -> None:
    """The task's heartbeats, every ``HEARTBEAT`` s until ``done`` (none for a short task).

    Flower's own sender raises SIGINT when the SuperNode no longer knows the task, which
    would stop this whole provider: a failed heartbeat is ignored here (the task's answer,
    or its failure, is reported anyway).
    """
    from flwr.proto.runtime_pb2 import SendTaskHeartbeatRequest

    while not done.wait(HEARTBEAT):
        try:
            client.SendTaskHeartbeat(SendTaskHeartbeatRequest())
        except Exception:  # the SuperNode going down: nothing to do for this task
            pass


def run_provider_node(supernode_args: Sequence[str], runtime_address: str,
                      poll: float = POLL) -> None:
    """Run ``flower-supernode --isolation process *supernode_args`` with a :class:`TaskWorker`.

    ``runtime_address`` is where the SuperNode serves its Runtime API (``127.0.0.1:PORT`` for
    ``--port PORT``). Returns when the SuperNode stops (Flower exits the process on SIGTERM).
    """
    from flwr.supercore import log
    from flwr.supernode.cli.flower_supernode import flower_supernode

    args = list(supernode_args)
    if "--isolation" in args:
        raise ValueError("run_provider_node sets --isolation process itself.")
    clock = PollClock(poll)
    if not patch_supernode_polling(clock):
        log(WARNING, "privpca: this Flower's SuperNode loop is not the one expected; it keeps "
                     "its own polling (rounds will be slower).")
    worker = TaskWorker(runtime_address, clock)
    thread = threading.Thread(target=worker.serve, name="privpca-task-worker", daemon=True)
    thread.start()
    argv = sys.argv
    sys.argv = ["flower-supernode", "--isolation", "process", *args]
    try:
        flower_supernode()
    finally:
        sys.argv = argv
        worker.stop.set()
        clock.wake.set()
