"""Request metrics are tallied in memory and written in bulk, exactly as
prometheus_client's own per-request calls would have written them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram

from queenadmin import metrics


def _samples(metric) -> dict[tuple[str, tuple], float]:
    return {
        (
            sample.name.rsplit("_", 1)[-1],
            tuple(sorted((k, v) for k, v in sample.labels.items() if k != "route")),
        ): sample.value
        for family in metric.collect()
        for sample in family.samples
        if sample.labels.get("route") in (None, "tally-test") and not sample.name.endswith("_created")
    }


def test_a_flush_writes_what_observe_would_have():
    latencies = [0.0005, 0.001, 0.0011, 0.003, 0.02, 0.02, 0.4, 7.0, 31.0, 100.0, 0.0]
    reference = Histogram(
        "reference_seconds", "reference", buckets=metrics.LATENCY_BUCKETS, registry=CollectorRegistry()
    )
    for seconds in latencies:
        reference.observe(seconds)
    process = metrics.process_metrics()
    before = _samples(process.latency)
    tally = metrics.RequestTally()
    for seconds in latencies:
        tally.started("tally-test")
        tally.finished("tally-test", 200 if seconds < 50 else 504, seconds)
    tally.started("tally-test")  # one still in progress
    tally.flush()
    after = _samples(process.latency)
    grown = {key: after[key] - before.get(key, 0.0) for key in after}
    assert grown == _samples(reference)
    assert process.requests.labels("tally-test", "200")._value.get() == 10
    assert process.requests.labels("tally-test", "504")._value.get() == 1
    assert process.in_progress.labels("tally-test")._value.get() == 1
    # Nothing twice: a second flush adds nothing.
    tally.flush()
    assert _samples(process.latency) == after
    assert process.requests.labels("tally-test", "200")._value.get() == 10
