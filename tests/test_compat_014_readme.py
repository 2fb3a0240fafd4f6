"""prime-runs 0.1.4's README examples, run against the stand-in (issue 24).

Each ``README_*`` string is the example's code as 0.1.4's README shows it (placeholders such
as ``team_...`` filled in); the test runs it unchanged with ``exec`` and then checks what the
platform received. Nothing outside this repository is read."""

from __future__ import annotations

import copy
import logging
import textwrap

import pytest

import prime_runs as pr

README_EVAL = """
import prime_runs as pr

run = pr.init(
    name="gsm8k-qwen3-8b",
    environments=["gsm8k"],      # hub names (get-or-create) or owner/name slugs
    model="Qwen/Qwen3-8B",
    framework="verifiers",
    config="eval.toml",          # the launched file, stored byte for byte
)
print(run.url)                   # https://app.primeintellect.ai/dashboard/evaluations/...

for episode in rollouts:
    run.log_episodes([episode])  # a queue put; bare traces: log_traces()

run.finish(summary=pr.metrics.from_episodes(episodes))
"""

README_TRAIN = """
run = pr.init(
    kind="train",
    name="qwen3-8b-gsm8k-rl",
    model="Qwen/Qwen3-8B",                    # the base model
    environments=["primeintellect/gsm8k"],    # hub ids, passed through
    training=pr.TrainingSpec(max_steps=1000, batch_size=64, rollouts_per_example=8),
    config=train_config.model_dump(),
    team_id="team_1",                         # external runs belong to a team
)

for step, (episodes, metrics) in enumerate(training_loop):
    run.log_episodes(episodes)          # episodes carry run.work.step (TrainRunInfo)
    run.log_metrics(metrics, step=step)

run.finish()
"""

README_ATTACH = """
run = pr.init(kind="train", id=os.environ["RUN_ID"])
run.log_metrics({"reward": 0.5}, step=0)
run.finish()
"""

README_HOSTED = """
run = pr.init(kind="train", id=os.environ["RUN_ID"], base_url=os.environ["PRIME_API_BASE"])
run.log_metrics({"reward": 0.5}, step=0)
run.finish()
"""

README_OPT_OUT = """
run = prime_runs.init(name="opted-out", environments=["gsm8k"], traces_opt_out=True)  # one run
run.log_episodes(episodes)
run.finish()
"""

CONFIG_TOML = "# the launched file\nmodel = 'Qwen/Qwen3-8B'\nrollouts = 4\n"


class TrainConfig:
    """What prime-rl passes: a pydantic model; ``model_dump()`` is all the example uses."""

    def model_dump(self) -> dict:
        return {"lr": 1e-6, "max_steps": 1000}


def run_example(source: str, **names: object) -> dict:
    namespace: dict = {"pr": pr, "prime_runs": pr, "os": __import__("os"), **names}
    exec(compile(textwrap.dedent(source), "<0.1.4 README>", "exec"), namespace)
    return namespace


def at_step(record: dict, step: int) -> dict:
    record = copy.deepcopy(record)
    record["id"] = f"{record['id']}-s{step}"
    for member in record["traces"]:
        member["id"] = f"{member['id']}-s{step}"
    record["run"] = {"name": "rl", "work": {"type": "train", "step": step}}
    return record


def test_the_eval_example(prime_env, episodes, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "eval.toml").write_text(CONFIG_TOML)
    ns = run_example(README_EVAL, rollouts=iter(episodes), episodes=episodes)
    run = ns["run"]
    assert capsys.readouterr().out.strip() == run.url
    assert run.url.endswith(f"/dashboard/evaluations/{run.id}")
    evaluation = prime_env.evaluations[run.id]
    assert evaluation["name"] == "gsm8k-qwen3-8b" and evaluation["model_name"] == "Qwen/Qwen3-8B"
    assert evaluation["metadata"][pr.CONFIG_SOURCE_KEY] == {
        "format": "toml",
        "text": CONFIG_TOML,
        "filename": "eval.toml",
    }
    assert run.config_source.text == CONFIG_TOML
    metrics = dict(evaluation["metrics"])
    assert metrics.pop("prime_runs") == {"traces_episodes_written": len(episodes)}
    assert metrics == pr.metrics.from_episodes(episodes)
    assert evaluation["finalize_count"] == 1 and run.status is pr.RunStatus.COMPLETED
    # 0.1.4 stored every episode in Prime Traces; so does this release (and the legacy table).
    assert {e["id"] for e in episodes} <= set(prime_env.episodes)
    for episode in episodes:  # keyed to the run, whatever id the producer recorded
        assert prime_env.episodes[episode["id"]]["run"]["id"] == run.id


def test_the_training_example(prime_env, episodes):
    loop = [
        ([at_step(episodes[0], 0), at_step(episodes[1], 0)], {"loss": 0.5, "reward": 0.25}),
        ([at_step(episodes[2], 1)], {"loss": 0.4, "reward": 0.5}),
    ]
    ns = run_example(README_TRAIN, training_loop=loop, train_config=TrainConfig())
    run = ns["run"]
    stored = prime_env.training_runs[run.id]
    assert stored["base_model"] == "Qwen/Qwen3-8B" and stored["team_id"] == "team_1"
    assert (stored["max_steps"], stored["batch_size"], stored["rollouts_per_example"]) == (
        1000,
        64,
        8,
    )
    assert stored["environments"] == [{"id": "primeintellect/gsm8k"}]
    assert stored["run_config"] == {"lr": 1e-6, "max_steps": 1000}
    rows = prime_env.training_metrics(run.id)
    assert [(r["step"], r["loss"]) for r in rows] == [(0, 0.5), (1, 0.4)]  # a row per call
    assert [c["step"] for c in prime_env.training_samples(run.id)] == [0]  # every 10th step
    assert stored["status"] == "completed"
    assert prime_env.episodes[f"{episodes[2]['id']}-s1"]["run"]["work"]["step"] == 1


def test_a_team_outside_the_allowlist_gets_forbidden(prime_env):
    prime_env.train_teams = ["other"]
    with pytest.raises(pr.ForbiddenError):
        run_example(README_TRAIN, training_loop=[], train_config=TrainConfig())
    assert prime_env.training_runs == {}


def test_the_attach_example(prime_env, monkeypatch):
    prime_env.add_training_run("launched-1")
    monkeypatch.setenv("RUN_ID", "launched-1")
    run_example(README_ATTACH)
    assert prime_env.requests_for("rft_register") == []
    assert prime_env.training_metrics("launched-1")[0]["reward"] == 0.5
    assert prime_env.training_runs["launched-1"]["status"] == "completed"


def test_the_hosted_example(prime_env, monkeypatch):
    prime_env.add_training_run("hosted-1", hosted=True)
    monkeypatch.setenv("RUN_ID", "hosted-1")
    monkeypatch.setenv("PRIME_API_BASE", prime_env.base_url + "/api/internal/rft")
    run_example(README_HOSTED)
    (row,) = prime_env.requests_for("internal_rft_metrics")
    assert row.headers["x-api-key"] == prime_env.api_key
    assert prime_env.training_runs["hosted-1"]["status"] == "completed"


def test_the_opt_out_examples(prime_env, episodes, monkeypatch):
    ns = run_example(README_OPT_OUT, episodes=episodes[:2])
    assert prime_env.requests_for("traces_upload") == []
    assert len(prime_env.samples(ns["run"].id)) == 2
    monkeypatch.setenv("PRIME_TRACES_OPT_OUT", "true")  # export PRIME_TRACES_OPT_OUT=true
    again = pr.init(name="job", environments=["gsm8k"])
    again.log_episodes(episodes[2:3])
    again.finish()
    assert prime_env.requests_for("traces_upload") == []
    assert len(prime_env.samples(again.id)) == 1


def test_with_run_closes_failed_and_finish_timeout_on_an_abort(prime_env, episodes):
    with pytest.raises(RuntimeError):
        with pr.init(name="boom", environments=["gsm8k"]) as run:
            run.log_episodes(episodes[:1])
            raise RuntimeError("boom")
    evaluation = prime_env.evaluations[run.id]
    assert evaluation["status"] == "FAILED" and "boom" in evaluation["error_message"]
    aborted = pr.init(name="abort", environments=["gsm8k"], finish_timeout=300)
    aborted.finish(timeout=5)
    assert prime_env.evaluations[aborted.id]["finalize_count"] == 1


def test_a_missing_api_key_never_stops_the_producer(episodes, caplog):
    # 0.1.4 disabled the run with a warning; here it runs offline into the local archive,
    # which `prime-runs sync` uploads later: the same code runs and keeps its records.
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        ns = run_example(README_OPT_OUT, episodes=episodes[:2])
    run = ns["run"]
    assert run.mode == "offline" and run.status is pr.RunStatus.COMPLETED
    assert run.logged_records == 2 and run.archive_path is not None
