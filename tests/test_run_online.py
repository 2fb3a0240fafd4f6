"""Online runs through init(): registration, close-out, fallback, on_error."""

from __future__ import annotations

import logging

import pytest

import prime_runs as pr


def open_run(platform, **kw):
    kw.setdefault("name", "gsm8k-run")
    kw.setdefault("environments", ["gsm8k"])
    kw.setdefault("model", "Qwen/Qwen3-8B")
    kw.setdefault("framework", "verifiers")
    return pr.init(**kw)


def test_online_run_registers_uploads_and_finalizes(prime_env, episodes):
    run = open_run(prime_env, config={"k": 1}, tags=["a"])
    assert run.mode == "online"
    (evaluation,) = prime_env.evaluations.values()
    assert run.id == evaluation["evaluation_id"]
    assert run.url and run.id in run.url
    assert evaluation["model_name"] == "Qwen/Qwen3-8B"
    assert evaluation["framework"] == "verifiers"
    assert evaluation["metadata"] == {"k": 1}
    assert evaluation["tags"] == ["a"]
    run.log_episodes(episodes)
    run.finish()
    assert run.status is pr.RunStatus.COMPLETED
    evaluation = prime_env.evaluations[run.id]
    assert evaluation["finalize_count"] == 1
    expected = pr.metrics.from_episodes(episodes)
    metrics = dict(evaluation["metrics"])
    assert metrics.pop("prime_runs") == {
        "traces_episodes_written": len(episodes),
        "records_summarized": len(episodes),  # the summary covers them all (docs/distributed.md)
    }
    assert metrics == expected
    assert len(prime_env.samples(run.id)) == len(episodes)
    assert set(prime_env.episodes) == {e["id"] for e in episodes}
    assert run.acknowledged_records == {"traces": len(episodes), "eval_samples": len(episodes)}
    assert run.failed_records == {} and run.dropped_records == 0 and run.errors == []
    # Drained before finalize: no upload after the finalize request.
    routes = [r.route for r in prime_env.requests]
    last_upload = max(i for i, r in enumerate(routes) if r in ("traces_upload", "samples_append"))
    assert last_upload < routes.index("eval_finalize")


def test_failed_run_is_closed_out(prime_env, episodes):
    run = open_run(prime_env, config={"k": 1})
    run.log_episodes(episodes[:2])
    run.finish(None, pr.RunStatus.FAILED, "ValueError: boom")
    evaluation = prime_env.evaluations[run.id]
    assert evaluation["status"] == "FAILED"
    assert evaluation["error_message"] == "ValueError: boom"
    assert evaluation["finalize_count"] == 0
    assert evaluation["metadata"] == {"k": 1}


@pytest.mark.prime_platform(variant="S")
def test_variant_s_gets_the_marker_merged_into_the_config(prime_env, caplog):
    run = open_run(prime_env, config={"k": 1})
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        run.finish(None, "cancelled", "interrupted")
    metadata = prime_env.evaluations[run.id]["metadata"]
    assert metadata["k"] == 1
    assert metadata["prime_runs"]["status"] == "cancelled"
    assert metadata["prime_runs"]["error"] == "interrupted"


def test_registration_failure_falls_back_to_offline(prime_env, episodes, caplog):
    prime_env.fail("eval_create", 500)
    with caplog.at_level(logging.WARNING, logger="prime_runs"):
        run = open_run(prime_env)
    assert run.mode == "offline"
    assert prime_env.evaluations == {}
    warnings = [r for r in caplog.records if "offline" in r.getMessage()]
    assert len(warnings) == 1
    assert prime_env.api_key not in caplog.text
    run.log_episodes(episodes[:2])
    run.finish()
    assert run.archive_path is not None


def test_registration_failure_raises_under_raise(prime_env):
    prime_env.fail("eval_create", 500)
    with pytest.raises(pr.APIError) as info:
        open_run(prime_env, on_error="raise")
    assert prime_env.api_key not in str(info.value)
    assert prime_env.api_key not in repr(info.value)


def test_unknown_environment_fails_init_and_creates_nothing(prime_env):
    with pytest.raises(pr.EnvironmentResolutionError, match="alice/missing"):
        open_run(prime_env, environments=["alice/missing"])
    assert prime_env.evaluations == {}


def test_attach_to_a_launcher_evaluation(prime_env, episodes):
    prime_env.add_evaluation("ev_launcher", name="hosted", status="RUNNING")
    run = open_run(prime_env, id="ev_launcher", config={"k": 1})
    assert run.id == "ev_launcher"
    assert [r.route for r in prime_env.requests] == []
    run.log_episodes(episodes[:3])
    run.finish()
    evaluation = prime_env.evaluations["ev_launcher"]
    assert evaluation["finalize_count"] == 1
    assert "k" not in (evaluation.get("metadata") or {})  # the launcher owns the config
    assert len(prime_env.samples("ev_launcher")) == 3


def test_on_error_raise_surfaces_at_finish_after_close_out(prime_env, episodes):
    run = open_run(prime_env, on_error="raise")
    prime_env.fail("eval_finalize", 500)
    run.log_episodes(episodes[:1])
    with pytest.raises(pr.APIError):
        run.finish()
    assert run.finished


def test_warn_never_raises_into_the_producer(prime_env, episodes):
    run = open_run(prime_env)
    prime_env.fail("eval_finalize", 500)
    run.log_episodes(episodes[:1])
    run.finish()
    assert any("close the run" in e for e in run.errors)


def test_api_key_never_in_reprs_or_archive(prime_env, episodes):
    from pathlib import Path

    run = open_run(prime_env)
    run.log_episodes(episodes[:2])
    run.finish()
    assert prime_env.api_key not in repr(run)
    files = [p for p in Path(run.archive_path).rglob("*") if p.is_file()]
    assert len(files) >= 3
    for path in files:
        if path.is_file():
            assert prime_env.api_key.encode() not in path.read_bytes(), path
