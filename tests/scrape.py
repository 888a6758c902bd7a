"""Reading a Prometheus endpoint in the tests: every sample by name, and sums over label subsets."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(port: int) -> Samples:
    """Samples by name from `http://127.0.0.1:<port>/metrics` (histograms as _count/_sum/_bucket samples)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


def value(samples: Samples, name: str, **labels: object) -> float:
    """The sum of the samples of `name` whose labels include `labels` (KeyError if there is no such metric)."""
    want = {k: str(v) for k, v in labels.items()}
    return sum(v for got, v in samples[name] if all(got.get(k) == x for k, x in want.items()))
