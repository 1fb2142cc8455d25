#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""The table, the goals and the plot of scripts/gpu-bench.

    bench/plot.py CSV [--table FILE] [--png FILE] [--title TEXT]

Reads the rows that halo-bench-cuda (L1, S1), halo-bench-tenants (T8, M1)
and halo-bench-load (C1) appended to CSV (bench/bench_common.h's columns),
prints one Markdown table with absolute figures and the ratios to the
native baselines of the same run (a tenant case measured in several rounds
by its median round), then the issue's goals, met or missed
(also written to --table FILE), and draws one PNG of the figures (--png;
skipped with a message when matplotlib is missing).
"""
import argparse
import csv
import math
import re
import sys

GOALS_TEXT = {
    "L1": "L1: submit -> completion seen by the client <= 2x native "
          "launch + cuStreamSynchronize (p50)",
    "S1-gpu": "S1: step time with BINDING_TABLE <= 1.15x the native graph",
    "S1-cpu": "S1: halod CPU <= 10 us a step with BINDING_TABLE",
    "T8-now": "T8: 8 tenants' steps/s >= 0.5x MPS (now)",
    "T8-goal": "T8: 8 tenants' steps/s >= 1x MPS (the goal)",
    "T64": "T64: 64 tenants, one worker per domain >= 0.55x MPS x64",
    "T-parts": "several workers per domain over MPS (workers-per-domain) "
               ">= 1x MPS",
    "M1": "M1: 0 MiB of GPU memory per additional client",
}


def number(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return math.nan
    return value


def load(path):
    rows = []
    with open(path, newline="") as file:
        for row in csv.DictReader(file):
            for key in ("clients", "n", "p50_us", "p99_us", "mean_us",
                        "per_second", "cpu_us", "daemon_cpu_us",
                        "memory_mib", "ms"):
                row[key] = number(row.get(key))
            rows.append(row)
    return rows


def median_rounds(rows):
    """The tenant cases measured in several rounds (scripts/gpu-bench's
    HALO_GPU_ROUNDS) as one row each, where the case first came: the round
    with the median steps/s (the lower one of an even count; a round
    without a figure, named as failed, is not counted), its note naming
    every round's figure in the order they ran; a case whose every round
    failed keeps its first row, noted so. Other rows are kept as they
    are."""
    groups = {}
    for i, row in enumerate(rows):
        key = (row["name"], row["impl"], row["clients"]) \
            if row["workload"] == "T8" else i
        groups.setdefault(key, []).append(row)
    return [median_round(group) for group in groups.values()]


def median_round(group):
    """One case's rounds (median_rounds) as its row."""
    if len(group) == 1:
        return group[0]
    measured = sorted((row for row in group
                       if not math.isnan(row["per_second"])),
                      key=lambda row: row["per_second"])
    if not measured:
        row = dict(group[0])
        reasons = "; ".join(r["note"] for r in group if r["note"])
        row["note"] = f"all {len(group)} rounds failed" + \
            (f": {reasons}" if reasons else "")
        return row
    median = dict(measured[(len(measured) - 1) // 2])
    figures = ", ".join(fmt(row["per_second"]) or "failed" for row in group)
    counted = f"{len(group)} rounds" if len(measured) == len(group) \
        else f"{len(measured)} measured rounds of {len(group)}"
    note = f"median of {counted} ({figures} steps/s)"
    median["note"] = f"{note}; {median['note']}" if median["note"] else note
    return median


def fmt(value, digits=1):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if abs(value) >= 10000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.{digits}f}"


def ratio(a, b):
    if a is None or b is None or math.isnan(a) or math.isnan(b) or b == 0:
        return math.nan
    return a / b


def fmt_ratio(value):
    return "" if math.isnan(value) else f"{value:.2f}x"


def find(rows, workload, name=None, impl=None, contains=None, clients=None):
    for row in rows:
        if row["workload"] != workload:
            continue
        if name is not None and row["name"] != name:
            continue
        if contains is not None and contains not in row["name"]:
            continue
        if impl is not None and row["impl"] != impl:
            continue
        if clients is not None and row["clients"] != clients:
            continue
        return row
    return None


def figure(row, key):
    return math.nan if row is None else row[key]


class Table:
    def __init__(self):
        self.lines = []

    def header(self, *columns):
        self.lines.append("| " + " | ".join(columns) + " |")
        self.lines.append("|" + "|".join(
            " --- " if i < 2 else " ---: " for i in range(len(columns))) +
            "|")

    def row(self, *cells):
        self.lines.append("| " + " | ".join(cells) + " |")

    def text(self, line=""):
        self.lines.append(line)


def l1_section(rows, table):
    native = find(rows, "L1", name="native launch+sync")
    table.text("### L1: one small kernel, submit -> completion seen by the "
               "client (us)")
    table.text()
    table.header("case", "impl", "p50", "p99", "halod CPU", "p50 / native",
                 "p99 / native")
    for row in rows:
        if row["workload"] != "L1" or " / " in row["name"]:
            continue
        table.row(row["name"], row["impl"], fmt(row["p50_us"]),
                  fmt(row["p99_us"]), fmt(row["daemon_cpu_us"]),
                  fmt_ratio(ratio(row["p50_us"], figure(native, "p50_us"))),
                  fmt_ratio(ratio(row["p99_us"], figure(native, "p99_us"))))
    table.text()
    # Queue B against the native anchors stepped in its own loop (the same
    # CPU), and against the native rows measured before it.
    beside = find(rows, "L1",
                  name="native launch+sync while another stream runs 2 ms")
    for row in rows:
        if row["workload"] != "L1" or "queue B" not in row["name"] \
                or " / " in row["name"]:
            continue
        alone_loop = find(rows, "L1",
                          name=row["name"] + " / native launch+sync, same loop")
        beside_loop = find(rows, "L1",
                           name=row["name"] + " / native beside a 2 ms kernel, "
                           "same loop")
        for anchor, what in ((alone_loop, "native launch+sync in the same "
                              "loop"),
                             (beside_loop, "native launch+sync beside a 2 ms "
                              "kernel in the same loop"),
                             (beside, "native launch+sync beside a 2 ms "
                              "kernel (measured before)")):
            if anchor is None:
                continue
            table.text(
                f"{row['name']}: p50 / {what} "
                f"{fmt_ratio(ratio(row['p50_us'], figure(anchor, 'p50_us')))}"
                f", p99 "
                f"{fmt_ratio(ratio(row['p99_us'], figure(anchor, 'p99_us')))}.")
        table.text()


def s1_section(rows, table):
    graph = find(rows, "S1", name="native graph launch + sync")
    table.text("### S1: 1000-dispatch command buffer, 16 bindings changed "
               "every step")
    table.text()
    table.header("case", "impl", "step p50 (us)", "p99", "steps/s",
                 "CPU (native: enqueue p50)", "halod CPU / step",
                 "p50 / native graph")
    for row in rows:
        if row["workload"] != "S1" or " / of which" in row["name"]:
            continue
        cpu = find(rows, "S1", contains=row["name"] + " / of which")
        table.row(row["name"].replace(" / ", ": "), row["impl"],
                  fmt(row["p50_us"]), fmt(row["p99_us"]),
                  fmt(row["per_second"]), fmt(figure(cpu, "p50_us")),
                  fmt(row["daemon_cpu_us"]),
                  fmt_ratio(ratio(row["p50_us"], figure(graph, "p50_us"))))
    table.text()
    table.text("\"native graph\" re-points nothing (fixed addresses): the "
               "floor. Steps/s = 1e6 / mean step.")
    table.text()


def t8_section(rows, table):
    mps = find(rows, "T8", impl="mps", clients=8)
    own = find(rows, "T8", impl="native", clients=8)
    table.text("### T8: N tenants, each looping a 20 us kernel + wait")
    table.text()
    table.header("case", "impl", "steps/s (all)", "step p50 (us)", "p99",
                 "client CPU / step", "halod CPU / step", "/ MPS x8",
                 "/ own contexts x8", "note")
    for row in rows:
        if row["workload"] != "T8":
            continue
        table.row(row["name"], row["impl"], fmt(row["per_second"]),
                  fmt(row["p50_us"]), fmt(row["p99_us"]), fmt(row["cpu_us"]),
                  fmt(row["daemon_cpu_us"]),
                  fmt_ratio(ratio(row["per_second"],
                                  figure(mps, "per_second"))),
                  fmt_ratio(ratio(row["per_second"],
                                  figure(own, "per_second"))),
                  row["note"])
    table.text()


M1_COLUMNS = (
    ("device used before", "device used: before"),
    ("device used with the first client", "with 1"),
    ("device used with all", "with all"),
    ("first client", "first client"),
    ("per additional client", "per additional client"),
    ("client process (NVML)", "a client process (NVML)"),
    ("halod with the first client (NVML)", "halod with 1 (NVML)"),
    ("halod with all (NVML)", "halod with all (NVML)"),
)


def m1_cases(rows):
    """{(impl, clients): {name: row}} in the order of the rows; of a case
    measured in several rounds (HALO_GPU_ROUNDS), the first round's, the
    main flow's, as in the runs before the rounds (the log and the CSV
    have every round's)."""
    cases = {}
    for row in rows:
        if row["workload"] == "M1":
            cases.setdefault((row["impl"], row["clients"]), {}).setdefault(
                row["name"], row)
    return cases


def m1_section(rows, table):
    table.text("### M1: GPU memory (MiB; NVML: device 0's memory in use, "
               "and per process)")
    table.text()
    table.header("impl", "clients", *[title for _, title in M1_COLUMNS],
                 "note")
    for (impl, clients), case in m1_cases(rows).items():
        if "per additional client" not in case:
            continue
        cells = [fmt(figure(case.get(name), "memory_mib"))
                 for name, _ in M1_COLUMNS]
        note = case.get("per additional client")
        table.row(impl, fmt(clients, 0), *cells,
                  note["note"] if note else "")
    table.text()
    table.text("per additional client = (with all - with 1) / (clients - "
               "1): the clients set up one first, then the rest.")
    table.text()
    steps = [row for row in rows if row["workload"] == "M1" and
             row["name"].startswith("set-up step: ")]
    if steps:
        table.text(f"halod's GPU memory per additional client by set-up "
                   f"step ({steps[0]['impl']}, "
                   f"{fmt(steps[0]['clients'], 0)} clients):")
        table.text()
        table.header("step", "MiB per client")
        for row in steps:
            table.row(row["name"][len("set-up step: "):],
                      fmt(row["memory_mib"], 2))
        table.text()


def c1_section(rows, table):
    table.text("### C1: loading executables (ms, measured by the client)")
    table.text()
    table.header("case", "impl", "ms", "halod / native", "note")
    for row in rows:
        if row["workload"] != "C1":
            continue
        native = None
        if row["impl"] != "native":
            native = find(rows, "C1", name=row["name"], impl="native")
        table.row(row["name"], row["impl"], fmt(row["ms"], 2),
                  fmt_ratio(ratio(row["ms"], figure(native, "ms"))),
                  row["note"])
    table.text()


def goals(rows, table):
    table.text("### Goals")
    table.text()
    table.header("goal", "measured", "verdict")

    def verdict(ok):
        if ok is None:
            return "not measured"
        return "met" if ok else "**missed**"

    native = find(rows, "L1", name="native launch+sync")
    for row in rows:
        if row["workload"] == "L1" and row["impl"] == "halod" and \
                "semaphore wait" in row["name"]:
            r = ratio(row["p50_us"], figure(native, "p50_us"))
            table.row(GOALS_TEXT["L1"] + f" [{row['name']}]",
                      f"{fmt(row['p50_us'])} us = {fmt_ratio(r)}",
                      verdict(None if math.isnan(r) else r <= 2))
    graph = find(rows, "S1", name="native graph launch + sync")
    table_graph = find(rows, "S1",
                       name="native graph, table copy + launch + sync")
    for row in rows:
        if row["workload"] != "S1" or row["impl"] != "halod" or \
                "binding table" not in row["name"]:
            continue
        r = ratio(row["p50_us"], figure(graph, "p50_us"))
        r2 = ratio(row["p50_us"], figure(table_graph, "p50_us"))
        table.row(GOALS_TEXT["S1-gpu"] + f" [{row['name']}]",
                  f"{fmt(row['p50_us'])} us = {fmt_ratio(r)} the fixed "
                  f"graph, {fmt_ratio(r2)} the graph + device table",
                  verdict(None if math.isnan(r) else r <= 1.15))
        cpu = row["daemon_cpu_us"]
        table.row(GOALS_TEXT["S1-cpu"] + f" [{row['name']}]",
                  f"{fmt(cpu)} us",
                  verdict(None if math.isnan(cpu) else cpu <= 10))
    halo8 = find(rows, "T8", impl="halod", clients=8)
    mps8 = find(rows, "T8", impl="mps", clients=8)
    r = ratio(figure(halo8, "per_second"), figure(mps8, "per_second"))
    measured = (f"{fmt(figure(halo8, 'per_second'))} /s against "
                f"{fmt(figure(mps8, 'per_second'))} = {fmt_ratio(r)}")
    if mps8 is not None and math.isnan(figure(mps8, "per_second")):
        measured += f" (MPS: {mps8['note']})"
    table.row(GOALS_TEXT["T8-now"], measured,
              verdict(None if math.isnan(r) else r >= 0.5))
    table.row(GOALS_TEXT["T8-goal"], fmt_ratio(r),
              verdict(None if math.isnan(r) else r >= 1))
    halo64 = find(rows, "T8", impl="halod", clients=64)
    mps64 = find(rows, "T8", impl="mps", clients=64)
    r = ratio(figure(halo64, "per_second"), figure(mps64, "per_second"))
    table.row(GOALS_TEXT["T64"],
              f"{fmt(figure(halo64, 'per_second'))} /s against "
              f"{fmt(figure(mps64, 'per_second'))} = {fmt_ratio(r)}",
              verdict(None if math.isnan(r) else r >= 0.55))
    # halod's workers over MPS (gpu-bench --workers-over-mps): each
    # configuration against MPS with as many clients.
    for row in rows:
        parts = re.match(r"halod-mps-w(\d+)-", row["impl"])
        if row["workload"] != "T8" or not parts or int(parts.group(1)) < 2:
            continue
        anchor = find(rows, "T8", impl="mps", clients=row["clients"])
        r = ratio(row["per_second"], figure(anchor, "per_second"))
        admitted = re.search(r"(\d+) of (\d+) clients failed",
                             anchor["note"] if anchor else "")
        against = f"{fmt(figure(anchor, 'per_second'))} /s"
        if admitted:
            against += (f" ({int(admitted.group(2)) - int(admitted.group(1))}"
                        " admitted)")
        table.row(GOALS_TEXT["T-parts"] +
                  f" [{row['impl']} x{fmt(row['clients'], 0)}]",
                  f"{fmt(row['per_second'])} /s against MPS "
                  f"{against} = {fmt_ratio(r)}",
                  verdict(None if math.isnan(r) else r >= 1))
    for (impl, clients), case in m1_cases(rows).items():
        if impl != "halod" or clients <= 1:
            continue
        mib = figure(case.get("per additional client"), "memory_mib")
        grew = figure(case.get("device used with all"), "memory_mib") - \
            figure(case.get("device used with the first client"),
                   "memory_mib")
        # Met when all the others together moved NVML's figure by less
        # than its 1 MiB unit.
        table.row(GOALS_TEXT["M1"] + f" [{fmt(clients, 0)} clients]",
                  f"{fmt(mib, 2)} MiB ({fmt(grew, 0)} MiB for "
                  f"{fmt(clients - 1, 0)} more)",
                  verdict(None if math.isnan(grew) else grew < 1))
    table.text()


def plot(rows, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        print(f"plot.py: no PNG ({error})", file=sys.stderr)
        return False
    fig, axes = plt.subplots(2, 3, figsize=(20, 11))
    colors = {"native": "#777777", "mps": "#4c72b0", "streams": "#8172b2",
              "hal": "#dd8452", "halod": "#c44e52"}

    def bars(ax, items, xlabel, log=False):
        items = [(n, v, i) for n, v, i in items if not math.isnan(v)]
        if not items:
            ax.text(0.5, 0.5, "not measured", ha="center")
            return
        names = [n for n, _, _ in items][::-1]
        values = [v for _, v, _ in items][::-1]
        ax.barh(names, values,
                color=[colors.get(i, "#55a868") for _, _, i in items][::-1])
        for y, v in enumerate(values):
            ax.text(v, y, " " + fmt(v), va="center", fontsize=7)
        ax.set_xlabel(xlabel)
        if log:
            ax.set_xscale("log")
        ax.tick_params(axis="y", labelsize=7)

    l1 = [(r["name"], r["p50_us"], r["impl"]) for r in rows
          if r["workload"] == "L1" and " / " not in r["name"]]
    bars(axes[0][0], l1, "L1: submit -> completion, p50 (us)", log=True)
    s1 = [(r["name"], r["p50_us"], r["impl"]) for r in rows
          if r["workload"] == "S1" and " / " not in r["name"]]
    bars(axes[0][1], s1, "S1: step p50 (us)")
    t8 = [(f"{r['impl']} x{fmt(r['clients'], 0)}", r["per_second"],
           r["impl"]) for r in rows if r["workload"] == "T8"]
    bars(axes[0][2], t8, "T8: 20 us kernels/s, all tenants", log=True)
    m1 = [(f"{r['impl']} x{fmt(r['clients'], 0)}: {r['name']}",
           r["memory_mib"], r["impl"]) for r in rows
          if r["workload"] == "M1" and r["clients"] > 1 and
          r["name"] in ("per additional client", "client process (NVML)")]
    bars(axes[1][0], m1, "M1: GPU memory (MiB)")
    c1 = [(f"{r['impl']}: {r['name']}"[:60], r["ms"], r["impl"])
          for r in rows if r["workload"] == "C1"]
    bars(axes[1][1], c1, "C1: load (ms)", log=True)
    axes[1][2].axis("off")
    legend = "\n".join(f"{k}: {v}" for k, v in {
        "native": "plain driver API, own context",
        "mps": "the same processes under NVIDIA MPS",
        "streams": "one process, a stream per tenant",
        "hal": "halo's CUDA driver in process (no daemon)",
        "halod": "through halod (libhalo clients)"}.items())
    axes[1][2].text(0, 0.5, legend, fontsize=10, va="center")
    fig.suptitle(title, fontsize=13)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("csv")
    parser.add_argument("--table")
    parser.add_argument("--png")
    parser.add_argument("--title", default="halo on the GPU")
    args = parser.parse_args()
    rows = median_rounds(load(args.csv))
    table = Table()
    table.text(f"## {args.title}")
    table.text()
    for section in (l1_section, s1_section, t8_section, m1_section,
                    c1_section, goals):
        section(rows, table)
    text = "\n".join(table.lines)
    print(text)
    if args.table:
        with open(args.table, "w") as file:
            file.write(text + "\n")
    if args.png:
        plot(rows, args.png, args.title)


if __name__ == "__main__":
    main()
