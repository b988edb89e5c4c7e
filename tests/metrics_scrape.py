"""Reading ``/metrics`` in tests: a scrape from loopback, and one sample's value."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client) -> Samples:
    """Every sample of a scrape from 127.0.0.1, keyed by (name, sorted labels)."""
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200, response.content[:500]
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels``; 0 when absent (a counter not yet counted)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
