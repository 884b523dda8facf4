"""Start-up: what `--help` and the job's imports cost, measured side by side in one run.

For each CLI (`transfer.cli.sweep`, `transfer.cli.validate`): `--help` as it is answered now (from
conf/, no Hydra, no torch), beside what a help that first imported the job would pay (the job
module's imports: torch, Optuna, the trainer — what `--help` cost before issue 14) and Hydra's
own `--hydra-help` (composes every group). Fresh interpreters, interleaved, median of
`--repeats`; run on idle cores.

    python benchmarks/startup.py --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = {
    "sweep --help": ["-m", "transfer.sweep", "--help"],
    "sweep: import the job (transfer.cli.run)": ["-c", "import transfer.cli.run"],
    "sweep --hydra-help": ["-m", "transfer.sweep", "--hydra-help"],
    "validate --help": ["-m", "transfer.validate", "--help"],
    "validate: import the job (transfer.cli.validate_job)": ["-c", "import transfer.cli.validate_job"],
    "validate --hydra-help": ["-m", "transfer.validate", "--hydra-help"],
}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    times: dict[str, list[float]] = {k: [] for k in CASES}
    for _ in range(args.repeats):
        for name, argv in CASES.items():  # interleaved: drift on a shared machine hits all
            t = time.perf_counter()
            subprocess.run([sys.executable, *argv], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"median of {args.repeats}, seconds (fresh interpreter each)")
    print("| command | median s | × the --help |")
    print("|---|---|---|")
    for name, m in med.items():
        cli = name.split()[0].rstrip(":")
        print(f"| {name} | {m:.2f} | {m / med[f'{cli} --help']:.0f}× |")


if __name__ == "__main__":
    main()
