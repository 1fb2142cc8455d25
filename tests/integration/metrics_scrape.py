# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Scrapes a running halod's /metrics as Prometheus does and checks it.

    metrics_scrape.py URL SESSIONS [fresh|stale]

Fetches URL twice, asking for the Prometheus text format (0.0.4) and for
OpenMetrics 1.0, and parses each with the Prometheus Python client's own
parsers (Debian: python3-prometheus-client; the OpenMetrics parser is
strict: it refuses clashing names, a missing "# EOF", bad histograms).
Then checks: the Content-Type of each, every family and sample name
unique, no per-session or per-process label, the process_* metrics present
and plausible, halo_sessions_active equal to SESSIONS, and the gauge
halo_metrics_snapshot_age_seconds:
- fresh (the default): halod's loop answers, the age is below WAIT_S;
- stale (halod's loop is blocked): CONCURRENT scrapes at once, both
  formats, all answered with the last snapshot (age at least WAIT_S)
  within STALE_BOUND_S together (in turn they would take CONCURRENT *
  WAIT_S), and one more after them at once (AT_ONCE_S) with an older age.

Exit status: 0 all good, 1 a check failed (each failure printed), 77 the
Prometheus client is not installed (the test is skipped).
"""
import sys
import threading
import time
import urllib.error
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

# How long halod waits for its loop before it serves the last snapshot
# (HALOD_METRICS_HTTP_WAIT_NS in daemon/metrics_http.c).
WAIT_S = 1.0
AGE = "halo_metrics_snapshot_age_seconds"
CONCURRENT = 6
# Bounds with room for a loaded machine (sanitizers, tests in parallel),
# still telling the behaviour apart: scrapes that each waited in turn would
# take CONCURRENT * WAIT_S (6 s), and a scrape that waited again WAIT_S.
STALE_BOUND_S = 5.0
AT_ONCE_S = 0.9
# Each stale scrape's own bound: past it, it fails (not the caller's 20 s).
STALE_TIMEOUT_S = 5

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def fetch(url, accept, timeout=10):
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=timeout) as response:
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


def parse_prometheus(content_type, text):
    check(
        content_type.startswith("text/plain; version=0.0.4"),
        f"0.0.4 Content-Type: {content_type}",
    )
    check("# EOF" not in text, "0.0.4 text has # EOF")
    return check_families(
        list(prometheus_parser.text_string_to_metric_families(text)), "0.0.4"
    )


def parse_openmetrics(content_type, text):
    check(
        content_type.startswith("application/openmetrics-text; version=1.0.0"),
        f"OpenMetrics Content-Type: {content_type}",
    )
    check(text.endswith("# EOF\n"), "OpenMetrics text does not end in # EOF")
    try:
        return check_families(
            list(openmetrics_parser.text_string_to_metric_families(text)),
            "OpenMetrics",
        )
    except ValueError as error:
        failures.append(f"OpenMetrics does not parse: {error}")
        return {}


def age(families, form):
    family = families.get(AGE)
    check(family is not None and family.type == "gauge",
          f"{form}: {AGE} is not a gauge")
    return value(families, AGE)


def timed_fetch(url, accept, results, index):
    started = time.monotonic()
    try:
        content_type, text = fetch(url, accept, timeout=STALE_TIMEOUT_S)
    except Exception as error:  # an HTTP error (503) or a timeout
        content_type, text = None, f"{type(error).__name__}: {error}"
    results[index] = (content_type, text, time.monotonic() - started)


def check_refusals(url):
    # Another method: 405 with the methods served (HTTP requires Allow).
    request = urllib.request.Request(url, data=b"x", method="POST")
    try:
        urllib.request.urlopen(request, timeout=10)
        failures.append("POST /metrics was answered, not refused")
    except urllib.error.HTTPError as error:
        check(error.code == 405, f"POST /metrics: {error.code}, not 405")
        allow = {m.strip() for m in (error.headers.get("Allow") or "").split(",")}
        check({"GET", "HEAD"} <= allow,
              f"POST /metrics: 405 with Allow {error.headers.get('Allow')!r}")
    # Another path: 404.
    other = url.rsplit("/", 1)[0] + "/other"
    try:
        urllib.request.urlopen(other, timeout=10)
        failures.append("GET /other was answered, not refused")
    except urllib.error.HTTPError as error:
        check(error.code == 404, f"GET /other: {error.code}, not 404")


def scrape_fresh(url):
    check_refusals(url)
    prometheus = parse_prometheus(*fetch(url, PROMETHEUS_ACCEPT))
    openmetrics = parse_openmetrics(*fetch(url, OPENMETRICS_ACCEPT))
    for families, form in ((prometheus, "0.0.4"), (openmetrics, "OpenMetrics")):
        seconds = age(families, form)
        check(seconds is not None and 0 <= seconds < WAIT_S,
              f"{form}: fresh, yet {AGE} is {seconds}")
    return prometheus, openmetrics


def scrape_stale(url):
    accepts = [(PROMETHEUS_ACCEPT, OPENMETRICS_ACCEPT)[i % 2]
               for i in range(CONCURRENT)]
    results = [None] * CONCURRENT
    threads = [threading.Thread(target=timed_fetch,
                                args=(url, accept, results, i))
               for i, accept in enumerate(accepts)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    print(f"{CONCURRENT} scrapes at once with the loop blocked: "
          f"{elapsed:.3f} s, each " +
          ", ".join(f"{r[2]:.3f}" for r in results) + " s")
    check(elapsed < STALE_BOUND_S,
          f"{CONCURRENT} scrapes at once took {elapsed:.3f} s "
          f"(bound {STALE_BOUND_S} s)")
    prometheus = openmetrics = {}
    oldest = 0
    for i, (content_type, text, seconds) in enumerate(results):
        if content_type is None:
            failures.append(f"scrape {i} failed after {seconds:.3f} s: {text}")
            continue
        if accepts[i] == PROMETHEUS_ACCEPT:
            families, form = parse_prometheus(content_type, text), "0.0.4"
            prometheus = families
        else:
            families, form = parse_openmetrics(content_type, text), "OpenMetrics"
            openmetrics = families
        stale_age = age(families, form)
        check(stale_age is not None and stale_age >= WAIT_S - 0.01,
              f"scrape {i} ({form}): stale, yet {AGE} is {stale_age}")
        oldest = max(oldest, stale_age or 0)
    # The loop has not taken the asks for over WAIT_S: no new wait.
    results = [None]
    timed_fetch(url, OPENMETRICS_ACCEPT, results, 0)
    content_type, text, seconds = results[0]
    print(f"one more scrape: {seconds:.3f} s")
    if content_type is None:
        failures.append(f"the scrape after them failed: {text}")
    else:
        later = age(parse_openmetrics(content_type, text), "OpenMetrics")
        check(seconds < AT_ONCE_S,
              f"the scrape after them took {seconds:.3f} s (bound "
              f"{AT_ONCE_S} s)")
        # The same stale snapshot, older (or, a millisecond on, as old to
        # the three decimals its age has): not a fresh one (age about 0).
        check(later is not None and later >= oldest,
              f"the scrape after them: {AGE} {later}, below {oldest}")
    return prometheus, openmetrics


def main():
    url, sessions = sys.argv[1], int(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else "fresh"
    if mode == "stale":
        prometheus, openmetrics = scrape_stale(url)
    else:
        prometheus, openmetrics = scrape_fresh(url)
    if not prometheus and not openmetrics:
        failures.append("no scrape parsed: nothing more to check")
        print("\n".join(failures))
        return 1

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
        print(f"{url} ({mode}): both formats parse; {len(openmetrics)} "
              "families")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
