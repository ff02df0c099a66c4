"""Issue 35, item 4: a federated provider's failures reach the server as fixed codes only.

The reply a provider builds in process (:func:`privpca.federated.flower_app._answer`, Flower's
``Message`` replaced by a recorder) is what the untrusted server receives: it must carry one
of the public codes of :data:`~privpca.federated.protocol.failures.PROVIDER_FAILURES` and
nothing of the error's text (a CSV's text cell with its row and column, a state file's path).
The text goes to the provider's log only with ``show-data-warnings``.
"""

from __future__ import annotations

import json
import logging
import re
import types

import numpy as np
import pytest

pytest.importorskip("flwr")

from privpca.federated import flower_app as fa
from privpca.federated.protocol import (
    PROVIDER_FAILURES,
    Query,
    failure_code,
    failure_reply,
)

SECRET = "SECRET_CELL_VALUE"


def _csv(path, secret_at=(6, 2), n=20, p=4):
    """A header-less CSV (a provider's format) with a text cell at ``secret_at`` (row, column):
    line 7, field 3."""
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        cells = [f"{v:.6f}" for v in rng.standard_normal(p) * 0.1]
        if secret_at is not None and i == secret_at[0]:
            cells[secret_at[1]] = SECRET
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


def _config(tmp_path, data, **extra):
    return {"data-path": str(data), "provider-id": "a", "n-components": 2, "epsilon": 1.0,
            "delta": 1e-5, "n-rounds": 2, "data-norm": 1.0, "centering": "none",
            "state-path": str(tmp_path / "state.json"), "noise-seed": 3, **extra}


def _query(p=4):
    return Query(round=1, support=np.arange(p), block=np.eye(p)[:, :2], n_features=p)


@pytest.fixture
def serve(monkeypatch):
    """Answer like the ClientApp, with Flower's Message replaced by a recorder: returns the
    Error the server would receive (or the RecordDict of an answer)."""
    monkeypatch.setattr(fa, "Message", lambda *args, **kwargs: (args, kwargs))

    def run(node_config, kind="query", message=None):
        content = fa.message_content(message if message is not None else _query())
        msg = types.SimpleNamespace(content=content)
        context = types.SimpleNamespace(node_config=node_config)
        if kind == "hello":
            (body,), _ = fa.answer_hello(msg, context)
        else:
            (body,), _ = fa._answer(kind, msg, context)
        return body

    return run


def _assert_fixed(error, code):
    """``error`` is exactly the fixed reply of ``code``: no text of the provider's own."""
    number, wording = PROVIDER_FAILURES[code]
    assert (error.code, error.reason) == (number, f"{code}: {wording}")
    assert SECRET not in error.reason
    assert not re.search(r"\d", error.reason)  # no row, column, count or line number
    assert "row" not in error.reason and "column" not in error.reason


def test_a_text_cell_reaches_the_server_as_a_code_without_the_cell_or_its_place(
        tmp_path, serve, caplog):
    data = _csv(tmp_path / "provider.csv")
    with caplog.at_level(logging.WARNING, logger="privpca.federated.provider"):
        for kind in ("hello", "query"):
            _assert_fixed(serve(_config(tmp_path, data), kind), "input-refused")
    # The provider's own log says which code it answered, without the error's text.
    assert "input-refused" in caplog.text
    assert SECRET not in caplog.text and "row 6" not in caplog.text
    assert not (tmp_path / "state.json").exists()  # refused before its counter opened


def test_with_show_data_warnings_the_provider_logs_the_full_error_for_itself(
        tmp_path, serve, caplog):
    data = _csv(tmp_path / "provider.csv")
    with caplog.at_level(logging.WARNING, logger="privpca.federated.provider"):
        error = serve(_config(tmp_path, data, **{"show-data-warnings": True}))
    _assert_fixed(error, "input-refused")  # the server's reply is the same
    assert SECRET in caplog.text  # the provider's own log has the error


def test_non_finite_cells_are_input_refused(tmp_path, serve):
    data = tmp_path / "nan.csv"
    data.write_text("0.1,0.2\n0.3,nan\n0.1,0.1\n")
    _assert_fixed(serve(_config(tmp_path, data)), "input-refused")


def test_the_budget_spent_is_over_budget_without_the_state_file(tmp_path, serve):
    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(1).standard_normal((30, 4)) * 0.1)
    config = _config(tmp_path, data)
    for r in (1, 2):
        body = serve(config, message=Query(round=r, support=np.arange(4),
                                           block=np.eye(4)[:, :2], n_features=4))
        assert type(body).__name__ == "RecordDict"  # answered
    error = serve(config)
    _assert_fixed(error, "over-budget")
    assert "state.json" not in error.reason and str(tmp_path) not in error.reason


def test_another_agreement_on_the_state_file_is_bad_agreement(tmp_path, serve):
    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(1).standard_normal((30, 4)) * 0.1)
    assert type(serve(_config(tmp_path, data))).__name__ == "RecordDict"
    error = serve(_config(tmp_path, data, epsilon=2.0))  # a second budget on the same file
    _assert_fixed(error, "bad-agreement")
    assert json.loads((tmp_path / "state.json").read_text())["releases"] == 1


def test_bad_settings_and_malformed_messages_have_their_codes(tmp_path, serve):
    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(1).standard_normal((30, 4)) * 0.1)
    config = _config(tmp_path, data)
    _assert_fixed(serve({k: v for k, v in config.items() if k != "epsilon"}), "bad-agreement")
    _assert_fixed(serve({**config, "n-components": 9,  # k > d
                         "state-path": str(tmp_path / "other.json")}), "bad-agreement")
    wrong_d = Query(round=1, support=np.arange(3), block=np.eye(3)[:, :2], n_features=3)
    _assert_fixed(serve(config, message=wrong_d), "query-refused")
    assert not json.loads((tmp_path / "state.json").read_text())["releases"]


def test_codes_are_decided_by_the_class_alone():
    from privpca.exceptions import BudgetExceededError, NonFiniteInputError
    from privpca.federated.protocol import ProviderInputError, QueryRefusedError
    from privpca.federated.protocol.counter import AgreementMismatchError
    from privpca.pipeline.preprocessing import BoundNotFoundError, GridRangeError

    cases = {RuntimeError(SECRET): "internal-error", ValueError(SECRET): "internal-error",
             GridRangeError(SECRET): "input-refused",
             BudgetExceededError(SECRET): "over-budget",
             AgreementMismatchError(SECRET): "bad-agreement",
             QueryRefusedError(SECRET): "query-refused",
             ProviderInputError(SECRET): "input-refused",
             NonFiniteInputError(SECRET): "input-refused",
             BoundNotFoundError(SECRET): "no-bound"}
    for exc, code in cases.items():
        assert failure_code(exc) == code
        number, reason = failure_reply(exc)
        assert (number, reason) == (PROVIDER_FAILURES[code][0],
                                    f"{code}: {PROVIDER_FAILURES[code][1]}")
    numbers = [number for number, _ in PROVIDER_FAILURES.values()]
    assert len(set(numbers)) == len(numbers) and min(numbers) > 100  # Flower's are < 100


def test_provider_command_passes_show_data_warnings_to_the_node(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from privpca.cli import main
    from privpca.federated import flower_node

    seen = {}
    monkeypatch.setattr(flower_node, "run_provider_node",
                        lambda args, address, poll: seen.setdefault("args", args))
    data = tmp_path / "x.npy"  # enough rows for the provider the command builds first
    np.save(data, np.random.default_rng(0).standard_normal((400, 2)))
    base = ["provider", str(data), "--superlink", "127.0.0.1:1", "--insecure", "-k", "1",
            "--provider-id", "a", "--epsilon", "1"]
    for flag, expected in (([], False), (["--show-data-warnings"], True)):
        seen.clear()
        result = CliRunner().invoke(main, [*base, *flag])
        assert result.exit_code == 0, result.output
        node_config = seen["args"][seen["args"].index("--node-config") + 1]
        assert ("show-data-warnings=true" in node_config) is expected


def test_the_provider_names_itself_never_by_its_files_name(tmp_path):
    """The server and the other providers see the provider's id: it was DATA's file stem by
    default ("patients_hiv_2024" reached the server: an outside tester); now it is asked for,
    and the node config refuses to start without one."""
    from click.testing import CliRunner

    from privpca.cli import main
    from privpca.federated.flower_provider import load_provider
    from privpca.federated.protocol import ProviderConfigError

    data = tmp_path / "patients_hiv_2024.npy"
    np.save(data, np.zeros((3, 2)))
    result = CliRunner().invoke(main, ["provider", str(data), "--superlink", "127.0.0.1:1",
                                       "--insecure", "-k", "1", "--epsilon", "1"])
    assert result.exit_code == 2 and "--provider-id" in result.output
    # Settings no query could be answered under are refused at start, not at the first query
    # (an outside tester: -k 7 on 6 columns started), and the refused trial pins nothing.
    state = tmp_path / "s.json"
    too_many = CliRunner().invoke(main, ["provider", str(data), "--superlink", "127.0.0.1:1",
                                         "--insecure", "-k", "3", "--epsilon", "1",
                                         "--provider-id", "a", "--state", str(state)])
    assert too_many.exit_code == 2 and "make no provider" in too_many.output
    assert not state.exists()
    config = _config(tmp_path, data)
    del config["provider-id"]
    with pytest.raises(ProviderConfigError, match="provider-id"):
        load_provider(config)


def test_the_server_command_refuses_what_no_run_could_honour():
    """k above d, and secure aggregation's settings without it, were passed on to the
    SuperLink (an outside tester); secure with one provider now speaks in flags."""
    from click.testing import CliRunner

    from privpca.cli import main

    base = ["server", "--superlink", "127.0.0.1:1", "--insecure", "-o", "r.json"]
    for args, words in ((["-d", "6", "-k", "7", "-N", "2"], "at most -d"),
                        (["-d", "6", "-k", "2", "-N", "3", "--min-providers", "2"],
                         "with --aggregation secure"),
                        (["-d", "6", "-k", "2", "-N", "1", "--aggregation", "secure"],
                         "Use --aggregation local-noise")):
        result = CliRunner().invoke(main, [*base, *args])
        assert result.exit_code == 2 and words in " ".join(result.output.split()), result.output


def test_the_start_check_shows_a_code_unless_the_data_holder_asks(tmp_path):
    """The provider command's start check reads DATA: a CSV's text cell is quoted by the
    reader's error, so, as in the provider's log, only the fixed code is shown unless
    --show-data-warnings (then the whole reason, for the data holder)."""
    from click.testing import CliRunner

    from privpca.cli import main

    data = _csv(tmp_path / "d.csv")
    args = ["provider", str(data), "--superlink", "127.0.0.1:1", "--insecure", "-k", "1",
            "--epsilon", "1", "--provider-id", "a", "--state", str(tmp_path / "s.json")]
    quiet = CliRunner().invoke(main, args)
    assert quiet.exit_code == 2 and "input-refused" in quiet.output
    assert SECRET not in quiet.output
    loud = CliRunner().invoke(main, [*args, "--show-data-warnings"])
    assert loud.exit_code == 2 and SECRET in loud.output
