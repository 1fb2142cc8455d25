#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""bench/plot.py over a CSV with tenant cases measured in several rounds
(scripts/gpu-bench's HALO_GPU_ROUNDS): each case's table row and goal are
its median round's, and the row's note names every round's figure.

    bench_plot_test.py SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

HEADER = ("workload,name,impl,clients,n,p50_us,p99_us,mean_us,per_second,"
          "cpu_us,daemon_cpu_us,memory_mib,ms,program,note\n")


def tenants(impl, clients, per_second, note="", p50=32.0):
    figure = "" if per_second is None else f"{per_second:.3f}"
    return (f'T8,"{clients} tenants, 20 us kernel + wait",{impl},{clients},'
            f',{p50:.3f},41.0,32.5,{figure},1.0,0.2,,,halo-bench-tenants,'
            f'"{note}"\n')


def memory(impl, clients, per_client):
    return (f'M1,"per additional client",{impl},{clients},,,,,,,,'
            f'{per_client:.3f},,halo-bench-tenants,""\n')


def main():
    source = sys.argv[1]
    rows = [
        # Rounds in the order gpu-bench runs them: halo, MPS, alternating.
        tenants("halod", 8, 180000, p50=44.0),
        memory("halod", 8, 0.0),
        tenants("mps", 8, 260000),
        tenants("halod", 64, 230000),
        tenants("mps", 64, 500000, "16 of 64 clients failed"),
        tenants("halod", 8, 240000, "per client 30000 /s", p50=31.5),
        memory("halod", 8, 2.6),
        tenants("mps", 8, 100000),
        tenants("halod", 64, None, "set-up failed"),
        tenants("mps", 64, 520000, "16 of 64 clients failed"),
        tenants("halod", 8, 250000, p50=30.0),
        tenants("mps", 8, 262000),
        tenants("halod", 64, 290000),
        tenants("mps", 64, 510000, "16 of 64 clients failed"),
        tenants("streams", 8, 230000),
        # Every round of a case failed: its first row stays, noted so.
        tenants("native", 8, None, "round 1: set-up failed"),
        tenants("native", 8, None, "round 2: set-up failed"),
    ]
    with tempfile.TemporaryDirectory() as folder:
        csv_path = os.path.join(folder, "gpu-bench.csv")
        table_path = os.path.join(folder, "gpu-bench.md")
        with open(csv_path, "w") as file:
            file.write(HEADER + "".join(rows))
        subprocess.run([sys.executable,
                        os.path.join(source, "bench", "plot.py"), csv_path,
                        "--table", table_path],
                       check=True, stdout=subprocess.DEVNULL)
        with open(table_path) as file:
            table = file.read()
    lines = table.splitlines()
    failures = []

    def expect(what, found):
        if not found:
            failures.append(what)

    t8_rows = [line for line in lines if line.startswith("| 8 tenants")
               or line.startswith("| 64 tenants")]
    # One row per case, not one per round.
    expect("4 tenant rows of halod and mps (got %d)" % len(
        [r for r in t8_rows if "| halod |" in r or "| mps |" in r]),
        len([r for r in t8_rows if "| halod |" in r or "| mps |" in r]) == 4)
    def case_row(impl, clients):
        """The table's one row of a case, or "" (none, or several)."""
        found = [r for r in t8_rows if r.startswith(f"| {clients} tenants")
                 and f"| {impl} |" in r]
        return found[0] if len(found) == 1 else ""

    halo8 = case_row("halod", 8)
    expect("halo x8's median round 240,000 with every round in its note, "
           "then the round's own note",
           "| 240,000 |" in halo8 and
           "median of 3 rounds (180,000, 240,000, 250,000 steps/s); "
           "per client 30000 /s" in halo8)
    # The row is the median round's (the second), every column: not the
    # first round's or the last's p50.
    expect("halo x8's step p50 is its median round's (31.5 us)",
           "| 240,000 | 31.5 |" in halo8)
    # MPS x8's median is 260,000: halo x8 / MPS x8 = 0.92x.
    expect("halo x8 against MPS x8's median round: 0.92x",
           "| 0.92x |" in halo8)
    halo64 = case_row("halod", 64)
    # A failed round is listed and not counted: the lower median of the two
    # measured ones.
    expect("halo x64: the lower median of its two measured rounds, the "
           "failed one named",
           "| 230,000 |" in halo64 and
           "median of 2 measured rounds of 3 (230,000, failed, 290,000 "
           "steps/s)" in halo64)
    expect("a case whose every round failed: one row, noted with the "
           "rounds' reasons",
           "all 2 rounds failed: round 1: set-up failed; round 2: set-up "
           "failed" in case_row("native", 8))
    goal = [line for line in lines if line.startswith("| T64:")]
    expect("T64's goal from the medians: 230,000 against 510,000 = 0.45x",
           goal and "230,000 /s against 510,000 = 0.45x" in goal[0])
    streams = case_row("streams", 8)
    expect("a case of one round keeps its row and note as they were",
           "| 230,000 |" in streams and "median" not in streams)
    # M1 is the first round's (the later rounds start on a fresh halod).
    m1 = [line for line in lines if line.startswith("| M1:")]
    expect("M1 from the first round: 0.00 MiB",
           m1 and "| 0.00 MiB" in m1[0])
    if failures:
        print(table)
        for failure in failures:
            print("FAILED:", failure)
        return 1
    print("bench/plot.py: median rounds as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
