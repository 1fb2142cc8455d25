# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""``python -m halogpu info [--address ADDRESS]``: the library, the session and
the devices of a running halod, as this client sees them."""

import argparse
import sys
import time
from typing import List, Optional

import halogpu


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else \
                f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def info(args: argparse.Namespace) -> int:
    print(f"halo package {halogpu.__version__} (ABI {halogpu.ABI_VERSION})")
    try:
        print(f"libhalo      {halogpu.library_version()} at "
              f"{halogpu.library_path()}")
        with halogpu.connect(args.address, client_name="halo-info") as client:
            started = time.perf_counter()
            client.ping()
            ping_us = (time.perf_counter() - started) * 1e6
            print(f"daemon       pid {client.daemon_pid} at {client.address}")
            print(f"session      {client.session_id} (ping {ping_us:.0f} us)")
            devices = client.devices
            print(f"devices      {len(devices)}")
            for device in devices:
                line = (f"  {device.ordinal}: {device.driver:<6} "
                        f"{device.name}, {_size(device.memory_bytes)}")
                if device.driver != "local":
                    major, minor = device.compute_capability
                    line += (f", compute {major}.{minor}, "
                             f"{device.multiprocessor_count} SMs")
                print(line)
    except (halogpu.HaloError, halogpu.LibraryError) as error:
        print(f"python -m halogpu info: {error}", file=sys.stderr)
        return 1
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m halogpu",
        description="halo's Python client: status of a running halod")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser(
        "info", help="the library, the daemon's pid and devices")
    command.add_argument(
        "--address", default=None,
        help="halod's ipc:// address (default: $HALO_ADDRESS, else "
             "ipc:///run/halo/halo.sock)")
    args = parser.parse_args(argv)
    return info(args)


if __name__ == "__main__":
    sys.exit(main())
