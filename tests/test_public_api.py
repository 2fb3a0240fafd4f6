"""The public surface is exactly what __init__ exports (a drop-in for verifiers 0.4.0)."""

from __future__ import annotations

import importlib
import pkgutil

import prime_runs as pr

EXPECTED = {
    "AmbiguousRunError",
    "APIError",
    "APITimeoutError",
    "CONFIG_SOURCE_KEY",
    "ConfigSource",
    "ConfigurationError",
    "ConflictError",
    "EnvironmentRef",
    "EnvironmentResolutionError",
    "ForbiddenError",
    "JournalError",
    "MODE_ENV",
    "TRACES_OPT_OUT_ENV",
    "NotFoundError",
    "PaymentRequiredError",
    "PrimeRunsError",
    "RecordError",
    "RetryableAPIError",
    "Run",
    "RunFinishedError",
    "RunKind",
    "RunProcessor",
    "RunStatus",
    "SyncError",
    "TrainingSpec",
    "TransportError",
    "UnauthorizedError",
    "ValidationRejectedError",
    "__version__",
    "ainit",
    "configure_exporter",
    "current_run",
    "init",
    "join",
    "log_episodes",
    "log_traces",
    "metrics",
    "projection",
    "record_score",
    "sampler",
    "semconv",
}


def test_all_is_exactly_the_public_surface():
    assert set(pr.__all__) == EXPECTED
    assert list(pr.__all__) == sorted(pr.__all__, key=lambda n: (not n.isupper(), n))
    for name in pr.__all__:
        assert hasattr(pr, name), name


def test_what_verifiers_touches():
    assert pr.MODE_ENV == "PRIME_RUNS_MODE"
    assert pr.RunStatus("completed") is pr.RunStatus.COMPLETED
    assert {s.name for s in pr.RunStatus} == {
        "RUNNING",
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "CRASHED",
    }
    assert callable(pr.metrics.from_episodes)
    assert callable(pr.projection.build_samples)
    assert callable(pr.projection.trace_to_sample)
    assert issubclass(pr.UnauthorizedError, pr.PrimeRunsError)
    for attr in (
        "id",
        "url",
        "name",
        "mode",
        "status",
        "finished",
        "span",
        "log_episodes",
        "log_traces",
        "flush",
        "finish",
        "fail",
        "dropped_records",
        "failed_records",
        "errors",
    ):
        assert hasattr(pr.Run, attr), attr


def test_version_satisfies_verifiers_pin():
    major, minor, patch = (int(x) for x in pr.__version__.split(".")[:3])
    assert (major, minor, patch) >= (0, 1, 4)


def test_every_module_imports_without_cycles():
    for module in pkgutil.walk_packages(pr.__path__, "prime_runs."):
        importlib.import_module(module.name)


def test_errors_are_a_tree_under_prime_runs_error():
    for name in pr.__all__:
        obj = getattr(pr, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, pr.PrimeRunsError), name


def test_the_exporters_module_is_exactly_three_span_exporters():
    from opentelemetry.sdk.trace.export import SpanExporter

    from prime_runs import exporters

    assert sorted(exporters.__all__) == [
        "PrimeRunsExporter",
        "PrimeTracesExporter",
        "SampleTableExporter",
    ]
    for name in exporters.__all__:
        assert issubclass(getattr(exporters, name), SpanExporter)
