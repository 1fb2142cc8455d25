# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Scrapes a running halod's /metrics as Prometheus does and checks it.

    metrics_scrape.py URL SESSIONS

Fetches URL twice, asking for the Prometheus text format (0.0.4) and for
OpenMetrics 1.0, and parses each with the Prometheus Python client's own
parsers (Debian: python3-prometheus-client; the OpenMetrics parser is
strict: it refuses clashing names, a missing "# EOF", bad histograms).
Then checks: the Content-Type of each, every family and sample name
unique, no per-session or per-process label, the process_* metrics present
and plausible, and halo_sessions_active equal to SESSIONS.

Exit status: 0 all good, 1 a check failed (each failure printed), 77 the
Prometheus client is not installed (the test is skipped).
"""
import sys
import time
import urllib.request

try:
    from prometheus_client.openmetrics import parser as openmetrics_parser
    from prometheus_client import parser as prometheus_parser
except ImportError:
    print("python3-prometheus-client is not installed (scripts/deps)")
    sys.exit(77)

PROMETHEUS_ACCEPT = "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
# What Prometheus 2.x sends.
OPENMETRICS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,"
    "application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
# Labels that would grow a series per client ("name" is the device's in
# halo_device_info, a client's elsewhere).
UNBOUNDED_LABELS = {"session", "pid", "name", "uid", "client"}
DEVICE_INFO = "halo_device_info"
PROCESS_METRICS = [
    "process_cpu_seconds",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
]

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def fetch(url, accept):
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers.get("Content-Type", ""), response.read().decode()


def check_families(families, form):
    names = [family.name for family in families]
    check(len(names) == len(set(names)), f"{form}: family names repeat: {names}")
    samples = {}
    for family in families:
        for sample in family.samples:
            owner = samples.setdefault(sample.name, family.name)
            check(
                owner == family.name,
                f"{form}: sample {sample.name} in families {owner} and "
                f"{family.name}",
            )
            unbounded = UNBOUNDED_LABELS & set(sample.labels)
            if sample.name == DEVICE_INFO:
                unbounded.discard("name")
            check(
                not unbounded,
                f"{form}: {sample.name} has per-client labels {unbounded}",
            )
    return {family.name: family for family in families}


def value(families, name):
    family = families.get(name)
    if not family or not family.samples:
        failures.append(f"no {name}")
        return None
    return family.samples[0].value


def main():
    url, sessions = sys.argv[1], int(sys.argv[2])

    content_type, text = fetch(url, PROMETHEUS_ACCEPT)
    check(
        content_type.startswith("text/plain; version=0.0.4"),
        f"0.0.4 Content-Type: {content_type}",
    )
    check("# EOF" not in text, "0.0.4 text has # EOF")
    prometheus = check_families(
        list(prometheus_parser.text_string_to_metric_families(text)), "0.0.4"
    )

    content_type, text = fetch(url, OPENMETRICS_ACCEPT)
    check(
        content_type.startswith("application/openmetrics-text; version=1.0.0"),
        f"OpenMetrics Content-Type: {content_type}",
    )
    check(text.endswith("# EOF\n"), "OpenMetrics text does not end in # EOF")
    try:
        openmetrics = check_families(
            list(openmetrics_parser.text_string_to_metric_families(text)),
            "OpenMetrics",
        )
    except ValueError as error:
        failures.append(f"OpenMetrics does not parse: {error}")
        openmetrics = {}

    for families, form in ((prometheus, "0.0.4"), (openmetrics, "OpenMetrics")):
        for name in PROCESS_METRICS:
            check(name in families, f"{form}: no {name}")
        check(
            families.get("process_cpu_seconds") is None
            or families["process_cpu_seconds"].type == "counter",
            f"{form}: process_cpu_seconds is not a counter",
        )
        active = value(families, "halo_sessions_active")
        check(active == sessions, f"{form}: halo_sessions_active {active}")
        check(
            families.get("halo_sessions") is not None
            and families["halo_sessions"].type == "counter",
            f"{form}: halo_sessions (its _total) is not a counter",
        )
    now = time.time()
    start = value(prometheus, "process_start_time_seconds")
    check(
        start is not None and now - 600 < start <= now + 1,
        f"process_start_time_seconds {start} is not within 10 min of {now}",
    )
    for name in ("process_open_fds", "process_max_fds",
                 "process_resident_memory_bytes",
                 "process_virtual_memory_bytes"):
        measured = value(prometheus, name)
        check(measured is not None and measured > 0, f"{name} is {measured}")
    fds, most = (value(prometheus, "process_open_fds"),
                 value(prometheus, "process_max_fds"))
    check(fds is None or most is None or fds < most, f"{fds} fds of {most}")

    for failure in failures:
        print(failure)
    if not failures:
        print(f"{url}: both formats parse; {len(openmetrics)} families")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
