#!/usr/bin/env python3
"""The memory-bound efficiency of a GPU from Liger-Kernel's published benchmark data.

Usage: memory_bound_efficiency.py CSV --peak-TBps P [--overhead-us U] [--min-MB M]

CSV is one of Liger-Kernel's benchmark/data/*_all_benchmark_data.csv files (linkedin/
Liger-Kernel; columns kernel_name, kernel_provider, kernel_operation_mode, metric_name,
x_value, y_value_50, extra_benchmark_config_str, gpu_name). P is the card's HBM peak in TB/s
(1e12 bytes/s), as its data sheet gives it. The estimate is what a hardware file's
`efficiency.memory_bandwidth` means in meshplan's cost model (docs/cost_model.md section 5):
a memory-bound kernel takes bytes / (efficiency * peak) + the hardware file's per-launch
overhead (U, 4 us by default). It is the median, over the single-kernel forward passes of the
fused norms (rms_norm, layer_norm by the liger and torchcompile providers) that move at least
M MB (64 by default, where the launch is a small part), of
bytes / ((median time - U) * peak), with bytes the input read and the output written.
The backward passes are left out: their timings include autograd's and the weight
gradient's reduction, which the suite does not separate. Prints one line per kernel and the
median; exits 2 on a file it cannot read that way.
"""
import argparse
import csv
import json
import statistics
import sys

BYTES = {"torch.bfloat16": 2, "torch.float16": 2, "torch.float32": 4}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("csv")
    parser.add_argument("--peak-TBps", type=float, required=True, dest="peak")
    parser.add_argument("--overhead-us", type=float, default=4.0, dest="overhead")
    parser.add_argument("--min-MB", type=float, default=64.0, dest="min_mb")
    args = parser.parse_args()
    if not args.peak > 0 or args.overhead < 0 or args.min_mb < 0:
        print("memory_bound_efficiency.py: --peak-TBps must be > 0, --overhead-us and --min-MB >= 0",
              file=sys.stderr)
        return 2
    try:
        with open(args.csv, newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        print(f"memory_bound_efficiency.py: {args.csv}: {e}", file=sys.stderr)
        return 2
    fractions = []
    for line, row in enumerate(rows, start=2):
        try:
            if (row["kernel_name"] not in ("rms_norm", "layer_norm")
                    or row["kernel_provider"] not in ("liger", "torchcompile")
                    or row["kernel_operation_mode"] != "forward" or row["metric_name"] != "speed"):
                continue
            config = json.loads(row["extra_benchmark_config_str"])
            width, seconds = float(row["x_value"]), float(row["y_value_50"]) * 1e-3
            moved = 2 * config["M"] * width * BYTES[config["dtype"]]  # read x, write y
        except (KeyError, ValueError, TypeError) as e:
            print(f"memory_bound_efficiency.py: {args.csv}:{line}: expected Liger-Kernel's "
                  f"benchmark columns ({e})", file=sys.stderr)
            return 2
        busy = seconds - args.overhead * 1e-6
        if moved < args.min_mb * 1e6 or busy <= 0:
            continue
        fractions.append(moved / busy / (args.peak * 1e12))
        print(f"{row['kernel_name']:10} {row['kernel_provider']:12} width {int(width):6} "
              f"{config['dtype']:15} {moved / 1e6:7.1f} MB {seconds * 1e3:8.4f} ms "
              f"{fractions[-1]:.3f}  ({row['gpu_name']})")
    if not fractions:
        print(f"memory_bound_efficiency.py: {args.csv}: no forward norm runs of at least "
              f"{args.min_mb} MB", file=sys.stderr)
        return 2
    print(f"median of {len(fractions)}: {statistics.median(fractions):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
