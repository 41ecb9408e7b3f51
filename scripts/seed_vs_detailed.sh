#!/usr/bin/env bash
# Prints docs/commands.md's table: seed vs detailed memory per GPU for the spec-* models,
# one GPU, micro-batch 1, no parallelism, from `meshplan estimate --format json`. Tensors
# only: the detailed total less its GPU runtime lines (CUDA context, NCCL, workspaces,
# allocator overhead), which the seed model does not have.
# Usage: scripts/seed_vs_detailed.sh [path/to/meshplan]
set -euo pipefail
meshplan="${1:-$(cd "$(dirname "$0")/.." && pwd)/build/meshplan}"
echo "| model | precision | seq | seed GB | detailed GB | detailed peak phase |"
echo "|---|---|---|---|---|---|"
for model in spec-194m-tied spec-246m spec-7b; do
  for precision in bf16 mixed; do
    for seq in 256 2048; do
      row=()
      for memory_model in seed detailed; do
        row+=("$("$meshplan" estimate --model "$model" --cluster 1xH100 --global-batch 1 --seq "$seq" \
          --precision "$precision" --memory-model "$memory_model" --format json |
          python3 -c 'import json,sys; m=json.load(sys.stdin)["memory"]; b=m["breakdown"]; runtime=sum(b.get(k, 0) for k in ("cuda_context_bytes", "nccl_buffers_bytes", "workspace_bytes", "allocator_overhead_bytes")); print("%.2f %s" % ((m["total_bytes"] - runtime)/1e9, m["peak_phase"]))')")
      done
      echo "| $model | $precision | $seq | ${row[0]%% *} | ${row[1]%% *} | ${row[1]#* } |"
    done
  done
done
