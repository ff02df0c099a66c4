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

This one process is also where a secure provider keeps its secure-aggregation state between
the messages of an aggregation (its ephemeral EC private keys, its self-mask seed, the shares
it received and the residues of the current step: :mod:`.flower_secagg`), in memory only:
:meth:`TaskWorker.serve` declares it (``keep_sessions_in_process``). Flower's stock SuperNode
(a process per message) refuses secure steps.

The worker runs privpca's ClientApp only, never code from the run's Flower App Bundle (FAB): a
run whose FAB names another ClientApp gets an error reply. (The stock SuperNode installs and
imports whatever app the FAB carries, with the provider's node config in reach.)

The waiting is Flower's own and runs at Flower's pace: Flower 1.41 offers no setting for it
(no ``flower-supernode`` option, no argument of a public function, no documented environment
variable; ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` sets only the stock SuperExec's polls of the
Runtime API, which this worker replaces). The SuperNode asks the SuperLink for work every 3 s
while it has none, waits for the worker's reply in 0.5 s steps, and retries the pull of an
object listed before its contents were uploaded after 1 s (doubling); the server's grid
retries its pulls of replies the same way. The worker is privpca's own loop: it asks the
SuperNode's Runtime API for a task every ``poll`` seconds (:data:`WORKER_POLL`, the interval
of Flower's SuperExec, unless the caller passes another). Nothing in Flower is replaced or
patched: what is pulled, stored, answered and pushed, and when, is Flower's code and privpca's.
A round costs about 4 s on localhost (``docs/BENCHMARKS.md``), nearly all of it these waits.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from logging import ERROR, INFO, WARNING
from typing import Any

__all__ = ["WORKER_POLL", "TaskWorker", "run_provider_node"]

#: Seconds between the worker's polls of the SuperNode's Runtime API for a task, by default
#: (Flower's SuperExec polls every 1 s).
WORKER_POLL = 1.0
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
    poll : float
        Seconds between the worker's polls of the Runtime API while no task is waiting.
    """

    def __init__(self, address: str, poll: float = WORKER_POLL) -> None:
        self.address, self.poll = address, float(poll)
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

        from privpca.federated.flower_secagg import keep_sessions_in_process

        keep_sessions_in_process()  # one process answers every message: secure steps too
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
                    continue  # another may be waiting
                self.stop.wait(self.poll)
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
                      poll: float = WORKER_POLL) -> None:
    """Run ``flower-supernode --isolation process *supernode_args`` with a :class:`TaskWorker`.

    ``runtime_address`` is where the SuperNode serves its Runtime API (``127.0.0.1:PORT`` for
    ``--port PORT``); ``poll`` is the worker's interval between polls of it (the SuperNode's
    own polls of the SuperLink are Flower's). Returns when the SuperNode stops (Flower exits
    the process on SIGTERM).
    """
    from flwr.supernode.cli.flower_supernode import flower_supernode

    args = list(supernode_args)
    if "--isolation" in args:
        raise ValueError("run_provider_node sets --isolation process itself.")
    worker = TaskWorker(runtime_address, poll)
    thread = threading.Thread(target=worker.serve, name="privpca-task-worker", daemon=True)
    thread.start()
    argv = sys.argv
    sys.argv = ["flower-supernode", "--isolation", "process", *args]
    try:
        flower_supernode()
    finally:
        sys.argv = argv
        worker.stop.set()
