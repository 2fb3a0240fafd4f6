"""prime-runs 0.1.4's public surface, name for name, against the stand-in (issue 24): every
exported name, ``init()`` keyword, ``Run`` member, constant and environment variable a 0.1.4
caller relies on, and what each does. The names below are 0.1.4's, written out here."""

from __future__ import annotations

import inspect
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import prime_runs as pr
from prime_runs.status import RunStatus

#: 0.1.4's ``prime_runs.__all__``.
EXPORTS_014 = (
    "init Run RunStatus RunKind TrainingSpec ConfigSource CONFIG_SOURCE_KEY EnvironmentRef "
    "TRACES_OPT_OUT_ENV MODE_ENV metrics projection PrimeRunsError ConfigurationError "
    "EnvironmentResolutionError APIError RunFinishedError ForbiddenError NotFoundError "
    "PaymentRequiredError RetryableAPIError TransportError UnauthorizedError"
).split()

#: 0.1.4's ``init()`` keywords (all keyword-only there).
INIT_014 = (
    "name environments model framework description tags config mode team_id api_key "
    "base_url on_error finish_timeout kind id training traces_opt_out"
).split()

#: 0.1.4's ``Run`` properties and methods, and the attributes its ``__init__`` set.
RUN_014 = (
    "id name url config_source mode status finished kind attached dropped_records "
    "failed_records log_traces log_episodes log_metrics update_summary flush finish fail "
    "reset_after_fork __enter__ __exit__ config summary errors"
).split()


def open_eval(**kw):
    kw.setdefault("name", "compat")
    kw.setdefault("environments", ["gsm8k"])
    return pr.init(**kw)


# -- names ---------------------------------------------------------------------------------


def test_every_014_export_is_here():
    missing = [name for name in EXPORTS_014 if not hasattr(pr, name)]
    assert missing == []
    assert set(EXPORTS_014) <= set(pr.__all__)
    assert (pr.TRACES_OPT_OUT_ENV, pr.MODE_ENV) == ("PRIME_TRACES_OPT_OUT", "PRIME_RUNS_MODE")
    assert pr.CONFIG_SOURCE_KEY == "config_source"


def test_init_takes_every_014_keyword():
    parameters = inspect.signature(pr.init).parameters
    assert [n for n in INIT_014 if n not in parameters] == []
    for name in INIT_014:  # each can be passed by keyword, as 0.1.4 required
        assert parameters[name].kind in (
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )
    defaults = {"finish_timeout": None, "traces_opt_out": None, "kind": "eval", "id": None}
    assert {n: parameters[n].default for n in defaults} == defaults


def test_run_has_every_014_member():
    run = pr.init(mode="disabled")
    assert [n for n in RUN_014 if not hasattr(run, n)] == []
    finish = inspect.signature(pr.Run.finish).parameters
    assert {"summary", "status", "error", "timeout"} <= set(finish)
    assert "timeout" in inspect.signature(pr.Run.fail).parameters
    assert inspect.signature(pr.Run.log_metrics).parameters["step"].default is None


def test_014_helpers_on_the_exported_types(tmp_path):
    assert pr.RunStatus.FAILED.is_terminal() and not pr.RunStatus.RUNNING.is_terminal()
    assert {s.value for s in pr.RunStatus} == {
        "running",
        "completed",
        "failed",
        "cancelled",
        "crashed",
    }
    path = tmp_path / "eval.toml"
    path.write_text("# kept\nlr = 1\n")
    source = pr.ConfigSource.from_file(path)
    assert (source.text, source.format) == ("# kept\nlr = 1\n", "toml")
    assert source.filename == "eval.toml"
    assert pr.ConfigSource.from_mapping(source.to_dict()) == source
    assert pr.ConfigSource.from_mapping({"format": "toml"}) is None
    assert pr.ConfigSource.coerce(str(path)) == source and pr.ConfigSource.coerce(None) is None
    with pytest.raises(pr.ConfigurationError, match=r"missing\.toml"):
        pr.ConfigSource.from_file(tmp_path / "missing.toml")
    with pytest.raises(TypeError):
        pr.ConfigSource.coerce(3)
    assert pr.EnvironmentRef.coerce("owner/gsm8k").slug == "owner/gsm8k"
    assert pr.EnvironmentRef.coerce("gsm8k").name == "gsm8k"
    spec = pr.TrainingSpec(max_steps=3, batch_size=8, rollouts_per_example=4, seq_len=2048)
    assert (spec.wandb_project, spec.wandb_entity, spec.wandb_run_name) == (None, None, None)
    with pytest.raises(ValueError):
        pr.TrainingSpec(max_steps=-1)


def test_the_014_exceptions_and_models_module_paths():
    from prime_runs import exceptions

    for name in (
        "APIError",
        "ConfigurationError",
        "ForbiddenError",
        "RetryableAPIError",
        "UnauthorizedError",
        "ValidationRejectedError",
        "TransportError",
        "APITimeoutError",
    ):
        assert getattr(exceptions, name) is getattr(pr, name)
    assert issubclass(pr.APITimeoutError, pr.TransportError)
    assert issubclass(pr.TransportError, pr.APIError)
    from prime_runs import models

    for name in ("RunStatus", "RunKind", "TrainingSpec", "ConfigSource", "EnvironmentRef"):
        assert getattr(models, name) is getattr(pr, name)
    assert (models.CONFIG_SOURCE_KEY, models.MAX_CONFIG_SOURCE_BYTES) == ("config_source", 262144)
    error = pr.APIError("no", status_code=503, code="x")
    assert (error.status_code, error.code) == (503, "x")


def test_the_exceptions_module_keeps_014s_extra_names():
    code = (
        "import sys\n"
        "from prime_runs.exceptions import is_record_rejection, is_transient\n"
        "assert 'prime_traces' not in sys.modules  # loaded only for its own classes\n"
        "from prime_runs.exceptions import LineFormatConflictError, TraceTooLargeError\n"
        "import prime_traces.exceptions as theirs\n"
        "assert TraceTooLargeError is theirs.TraceTooLargeError\n"
        "assert LineFormatConflictError is theirs.LineFormatConflictError\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    from prime_runs import exceptions

    assert exceptions.is_transient(pr.TransportError("down"))
    assert exceptions.is_transient(pr.APITimeoutError("slow"))
    assert not exceptions.is_transient(pr.ForbiddenError("no", status_code=403))
    assert exceptions.is_record_rejection(pr.ValidationRejectedError("bad", status_code=400))
    assert exceptions.is_record_rejection(pr.APIError("too big", status_code=413))
    assert exceptions.is_record_rejection(pr.RecordError("nan"))
    assert not exceptions.is_record_rejection(pr.ConfigurationError("no key"))
    assert not exceptions.is_record_rejection(pr.APIError("down", status_code=503))
    with pytest.raises(AttributeError):
        exceptions.NoSuchError  # noqa: B018


# -- traces_opt_out ------------------------------------------------------------------------


def test_traces_opt_out_sends_episodes_to_the_legacy_table_only(prime_env, episodes):
    run = open_eval(traces_opt_out=True)
    run.log_episodes(episodes)
    run.finish()
    assert prime_env.requests_for("traces_upload") == []  # never contacted
    assert len(prime_env.samples(run.id)) == len(episodes)
    assert prime_env.evaluations[run.id]["finalize_count"] == 1
    assert run.acknowledged_records == {"eval_samples": len(episodes)}
    assert run.errors == []


@pytest.mark.parametrize("value", ["true", " YES ", "1", "on"])
def test_the_environment_variable_opts_out(prime_env, episodes, monkeypatch, value):
    monkeypatch.setenv(pr.TRACES_OPT_OUT_ENV, value)
    run = open_eval()
    run.log_episodes(episodes[:2])
    run.finish()
    assert prime_env.requests_for("traces_upload") == []
    assert len(prime_env.samples(run.id)) == 2


@pytest.mark.parametrize("value", ["false", "0", "off", "no", "", "  "])
def test_a_no_or_blank_variable_stays_on_prime_traces(prime_env, episodes, monkeypatch, value):
    monkeypatch.setenv(pr.TRACES_OPT_OUT_ENV, value)
    run = open_eval()
    run.log_episodes(episodes[:2])
    run.finish()
    assert len(prime_env.requests_for("traces_upload")) >= 1
    assert {e["id"] for e in episodes[:2]} <= set(prime_env.episodes)


def test_the_argument_beats_the_variable(prime_env, episodes, monkeypatch):
    monkeypatch.setenv(pr.TRACES_OPT_OUT_ENV, "1")
    run = open_eval(traces_opt_out=False)
    run.log_episodes(episodes[:1])
    run.finish()
    assert episodes[0]["id"] in prime_env.episodes


@pytest.mark.parametrize("stored", [True, "true", "Yes"])
def test_the_config_file_opts_out(prime_env, episodes, stored):
    config = Path.home() / ".prime"  # prime_env's empty HOME
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.json").write_text(json.dumps({"traces_opt_out": stored}))
    run = open_eval()
    run.log_episodes(episodes[:1])
    run.finish()
    assert prime_env.requests_for("traces_upload") == []
    assert len(prime_env.samples(run.id)) == 1


def test_a_bad_variable_fails_init_before_anything_is_created(prime_env, monkeypatch):
    monkeypatch.setenv(pr.TRACES_OPT_OUT_ENV, "maybe")
    with pytest.raises(pr.ConfigurationError, match=r"PRIME_TRACES_OPT_OUT='maybe'.*true"):
        open_eval()
    assert prime_env.requests == []
    run = pr.init(mode="disabled")  # a disabled run never reads it
    assert run.mode == "disabled"
    monkeypatch.setenv(pr.MODE_ENV, "disabled")
    assert pr.init().mode == "disabled"


@pytest.mark.parametrize("value", ["yes", 1, 0.0])
def test_a_bad_argument_is_a_typed_error_naming_it(prime_env, value):
    with pytest.raises(pr.ConfigurationError, match=r"traces_opt_out= must be True, False or None"):
        open_eval(traces_opt_out=value)
    assert prime_env.requests == []


def test_an_opted_out_training_run_keeps_its_parquet_table(prime_env, episodes):
    record = dict(episodes[0], run={"work": {"type": "train", "step": 0}})
    run = pr.init(
        kind="train",
        model="m",
        environments=["gsm8k"],
        team_id="team-1",
        training=pr.TrainingSpec(max_steps=2),
        traces_opt_out=True,
    )
    run.log_episodes([record])
    run.log_metrics({"loss": 0.5}, step=0)
    run.finish()
    assert prime_env.requests_for("traces_upload") == []
    assert [c["step"] for c in prime_env.training_samples(run.id)] == [0]
    assert [r["loss"] for r in prime_env.training_metrics(run.id)] == [0.5]


def test_an_opted_out_training_run_without_pyarrow_fails_as_in_014(prime_env, monkeypatch):
    import prime_runs.exporters.train_samples as train_samples

    monkeypatch.setattr(train_samples, "parquet_available", lambda: False)
    with pytest.raises(pr.ConfigurationError, match=r"prime-runs\[train\]"):
        pr.init(kind="train", model="m", team_id="t", environments=["e"], traces_opt_out=True)
    assert prime_env.requests == []


# -- finish_timeout ------------------------------------------------------------------------


@pytest.mark.parametrize("value", [-1, math.nan, "30", True])
def test_a_bad_finish_timeout_is_a_typed_error_naming_it(prime_env, value):
    with pytest.raises(pr.ConfigurationError, match=r"finish_timeout="):
        open_eval(finish_timeout=value)
    assert prime_env.requests == []


def test_finish_timeout_bounds_finish(prime_env, episodes):
    run = open_eval(finish_timeout=1.0)
    prime_env.stall("traces_upload", 20)
    try:
        run.log_episodes(episodes[:2])
        started = time.monotonic()
        run.finish()
        took = time.monotonic() - started
    finally:
        prime_env.unstall()
    assert took < 8, took  # 1 s of draining, then the close-out; not the 20 s stall
    assert run.status is RunStatus.COMPLETED


def test_a_timeout_given_to_finish_or_fail_wins(prime_env, episodes):
    run = open_eval(finish_timeout=0)
    run.log_episodes(episodes[:2])
    run.fail("stopped", timeout=30)  # enough to drain: every record is stored
    assert len(prime_env.samples(run.id)) == 2
    assert prime_env.evaluations[run.id]["status"] == "FAILED"
    assert prime_env.evaluations[run.id]["error_message"] == "stopped"


# -- update_summary, summary, config, config_source, attached ------------------------------


def test_update_summary_joins_the_computed_summary(prime_env, episodes):
    run = open_eval()
    run.log_episodes(episodes)
    run.update_summary({"pass@1": 0.5, "broken": math.inf, "nested": {"x": math.nan, "y": 1}})
    run.summary["written"] = 2  # 0.1.4 callers could write into the dict as well
    run.finish()
    metrics = dict(prime_env.evaluations[run.id]["metrics"])
    metrics.pop("prime_runs")
    assert metrics == {
        **pr.metrics.from_episodes(episodes),
        "pass@1": 0.5,
        "nested": {"y": 1},
        "written": 2,
    }
    assert run.summary["pass@1"] == 0.5 and "broken" not in run.summary


def test_finish_summary_wins_over_update_summary(prime_env, episodes):
    run = open_eval()
    run.log_episodes(episodes[:1])
    run.update_summary({"a": 1, "b": 1})
    run.finish(summary={"b": 2})
    metrics = dict(prime_env.evaluations[run.id]["metrics"])
    metrics.pop("prime_runs")
    assert metrics == {"a": 1, "b": 2}  # 0.1.4 merged them the same way


def test_update_summary_bad_input_and_after_finish(prime_env, episodes):
    run = open_eval()
    with pytest.raises(TypeError, match="mapping"):
        run.update_summary([("a", 1)])
    with pytest.raises(TypeError, match="JSON"):
        run.update_summary({"a": object()})
    run.log_episodes(episodes[:1])
    run.finish()
    sent = dict(prime_env.evaluations[run.id]["metrics"])
    run.update_summary({"late": 1})  # warned and counted, never fatal
    assert "late" not in run.summary and any("update_summary" in e for e in run.errors)
    assert prime_env.evaluations[run.id]["metrics"] == sent

    strict = open_eval(on_error="raise")
    strict.log_episodes(episodes[:1])
    strict.finish()
    with pytest.raises(pr.RunFinishedError, match="before finish"):
        strict.update_summary({"late": 1})


def test_a_disabled_run_keeps_the_summary_on_the_handle():
    run = pr.init(mode="disabled", finish_timeout=1, traces_opt_out=True)
    run.update_summary({"a": 1, "b": math.nan})
    assert run.summary == {"a": 1}
    assert (run.attached, run.config, run.config_source) == (False, {}, None)
    run.reset_after_fork()  # 0.1.4's fork hook called it; harmless here
    run.finish()
    assert run.finished and run.status is RunStatus.COMPLETED


def test_config_and_config_source(prime_env, tmp_path):
    path = tmp_path / "eval.toml"
    path.write_text("# launched with\nmodel = 'q'\n")
    run = open_eval(config=str(path))
    assert run.config_source == pr.ConfigSource(path.read_text(), "toml", "eval.toml")
    assert run.config[pr.CONFIG_SOURCE_KEY]["text"] == path.read_text()
    run.finish()
    mapped = open_eval(config={"lr": 1e-5})
    assert mapped.config == {"lr": 1e-5} and mapped.config_source is None
    mapped.config["added"] = True  # as 0.1.4: sent with the close-out
    mapped.finish()
    assert prime_env.evaluations[mapped.id]["metadata"] == {"lr": 1e-5, "added": True}


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("train.toml", "toml"),
        ("eval.json", "json"),
        ("run.yaml", "yaml"),
        ("run.yml", "yaml"),
        ("config", "text"),
    ],
)
def test_config_source_format_from_the_suffix(tmp_path, filename, expected):
    path = tmp_path / filename
    path.write_text("x = 1")
    assert pr.ConfigSource.coerce(path).format == expected


def test_config_source_errors_say_what_is_wrong(tmp_path):
    with pytest.raises(pr.ConfigurationError, match="does not exist"):
        pr.ConfigSource.coerce("environment = 'gsm8k'")  # a str is a path, never inline text
    big = tmp_path / "big.toml"
    big.write_text("x = 1\n" * 262144)
    with pytest.raises(pr.ConfigurationError, match="over the"):
        pr.ConfigSource.coerce(big)
    binary = tmp_path / "eval.toml"
    binary.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(pr.ConfigurationError, match="not UTF-8"):
        pr.ConfigSource.coerce(binary)
    with pytest.raises(TypeError, match="config source must be"):
        pr.ConfigSource.coerce(object())


def test_a_disabled_run_reports_its_config_source(tmp_path):
    path = tmp_path / "train.toml"
    path.write_text("# the launched file\n")
    run = pr.init(environments=["gsm8k"], mode="disabled", config=path)
    assert run.config_source == pr.ConfigSource("# the launched file\n", "toml", "train.toml")
    run.finish()
    assert pr.init(mode="disabled").config_source is None
    missing = pr.init(mode="disabled", config=str(tmp_path / "gone.toml"))  # never fatal here
    assert missing.config_source is None and missing.config == {}


def test_values_merged_onto_a_launch_file_and_kept_through_a_failure(prime_env, tmp_path):
    path = tmp_path / "eval.toml"
    path.write_text("# launched\nmodel = 'x'\n")
    run = open_eval(
        config={"model": "x", pr.CONFIG_SOURCE_KEY: pr.ConfigSource.from_file(path).to_dict()}
    )
    assert run.config_source.filename == "eval.toml"
    run.fail("something broke")
    evaluation = prime_env.evaluations[run.id]
    assert evaluation["status"] == "FAILED" and evaluation["error_message"] == "something broke"
    assert evaluation["metadata"]["model"] == "x"
    assert evaluation["metadata"][pr.CONFIG_SOURCE_KEY]["text"] == path.read_text()


def test_a_disabled_run_answers_every_call_and_keeps_an_attached_id(isolated_env):
    run = pr.init(mode="disabled")
    run.log_traces([{"id": "t1"}])
    run.log_metrics({"loss": 0.1}, step=1)
    run.finish(summary={"avg_reward": 1.0})
    assert run.id.startswith("disabled-") and run.url is None
    assert run.status is RunStatus.COMPLETED and run.dropped_records == 0
    assert not isolated_env.exists()  # nothing written
    hosted = pr.init(mode="disabled", id="eval-hosted")
    assert (hosted.id, hosted.attached) == ("eval-hosted", False)  # nothing to hand back to
    hosted.finish()
    managed = pr.init(kind="train", mode="disabled", id="run-managed", model="m")
    assert (managed.id, managed.kind) == ("run-managed", "train")
    managed.log_metrics({"loss": 0.1}, step=1)
    managed.finish()
    assert managed.status is RunStatus.COMPLETED


def test_writes_after_finish_are_reported_or_raised(prime_env, episodes):
    strict = open_eval(on_error="raise")
    strict.finish()
    for write in (
        lambda: strict.log_traces([{"id": "t1"}]),
        lambda: strict.log_episodes(episodes[:1]),
        lambda: strict.update_summary({"late": 1.0}),
    ):
        with pytest.raises(pr.RunFinishedError):
            write()


def test_attached(prime_env):
    registered = open_eval()
    assert registered.attached is False
    registered.finish()
    prime_env.add_evaluation("eval-launched")
    attached = pr.init(id="eval-launched")
    assert attached.attached is True and attached.id == "eval-launched"
    attached.finish()
    prime_env.add_training_run("train-launched")
    train = pr.init(kind="train", id="train-launched")
    assert train.attached is True and train.kind == "train"
    train.finish()
    assert prime_env.training_runs["train-launched"]["status"] == "completed"


def test_update_summary_in_a_joined_process_says_where_to_call_it(isolated_env):
    owner = pr.init(name="owner")
    code = (
        "import json, sys, prime_runs as pr\n"
        "run = pr.init(join=json.loads(sys.argv[1]))\n"
        "run.update_summary({'worker': 1})\n"
        "print(json.dumps(run.summary))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(owner.context())],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == {"worker": 1}
    assert "process that started the run sends the summary" in done.stderr
    owner.update_summary({"owner": 1})
    owner.finish()
    status = json.loads((Path(owner.archive_path) / "status.json").read_text())
    assert status["summary"]["owner"] == 1 and "worker" not in status["summary"]


def test_the_doc_names_every_014_name_of_the_surface():
    text = (Path(__file__).parents[1] / "docs" / "coming-from-0.1.4.md").read_text("utf-8")
    start = text.index("## The rest of the surface")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    for name in [*EXPORTS_014, *INIT_014, *RUN_014, "PRIME_TRACES_OPT_OUT", "is_terminal"]:
        if name.startswith("__"):
            continue  # `with run:` stands for __enter__/__exit__
        assert f"{name}" in section, name
    assert "with run:" in section


def test_update_summary_stays_on_top_of_a_summary_over_workers_elsewhere(prime_env, tmp_path):
    worker = (
        "import json, sys, prime_runs as pr\n"
        "with pr.init(join=json.loads(sys.argv[1])) as run:\n"
        "    run.log_episodes([{'id': f'ep-w-{i}', 'env': {'id': 'gsm8k'}, 'ok': True,\n"
        "        'traces': [{'id': f'tr-w-{i}', 'rewards': {'c': {'score': 0.0}},\n"
        "                    'timing': {'start': 1.0}}]} for i in range(3)])\n"
    )
    owner = open_eval()
    owner.log_episodes(
        {"id": "ep-o", "env": {"id": "gsm8k"}, "ok": True,
         "traces": [{"id": "tr-o", "rewards": {"c": {"score": 1.0}}, "timing": {"start": 1.0}}]}
    )  # fmt: skip
    env = {**os.environ, "PRIME_RUNS_DIR": str(tmp_path / "other-disk")}
    subprocess.run(
        [sys.executable, "-c", worker, json.dumps(owner.context())],
        env=env,
        check=True,
        timeout=90,
    )
    owner.update_summary({"pass@1": 0.25, "avg_reward": 9.0})  # the caller's numbers win
    owner.finish()
    (request,) = prime_env.requests_for("eval_finalize")
    metrics = request.json["metrics"]
    assert metrics["prime_runs"]["records_summarized"] == 4  # the worker's records count
    assert metrics["avg_metrics"] == {"c": 0.25}
    assert (metrics["pass@1"], metrics["avg_reward"]) == (0.25, 9.0)
