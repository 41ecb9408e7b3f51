#!/usr/bin/env bash
# scripts/memory_bound_efficiency.py (CTest "scripts: ..."): on a small file in Liger-Kernel's
# benchmark format with known times, the estimate is the median of bytes / ((t - overhead) *
# peak) over the forward fused-norm runs of at least 64 MB; everything else is skipped; a file
# of another shape and a bad peak exit 2 naming the problem.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
script="$here/../../scripts/memory_bound_efficiency.py"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fail() { echo "memory_bound_efficiency_test.sh: $*" >&2; exit 1; }
header='kernel_name,kernel_provider,kernel_operation_mode,metric_name,metric_unit,x_name,x_label,x_value,y_value_50,y_value_20,y_value_80,extra_benchmark_config_str,gpu_name,timestamp,liger_version'
cfg='"{""M"": 2048, ""dtype"": ""torch.bfloat16""}"'
# 2048 x 16384 bf16 read + written = 134,217,728 bytes. At a 1 TB/s peak with 4 us of launch:
# 0.138217728 ms -> 1.0; 0.272435456 ms -> 0.5; 0.071108864 ms -> 2.0 (three runs: median 1.000).
{
  echo "$header"
  echo "rms_norm,liger,forward,speed,ms,H,h,16384,0.138217728,0,0,$cfg,GPU,t,v"
  echo "rms_norm,torchcompile,forward,speed,ms,H,h,16384,0.272435456,0,0,$cfg,GPU,t,v"
  echo "layer_norm,liger,forward,speed,ms,N,h,16384,0.071108864,0,0,$cfg,GPU,t,v"
  echo "rms_norm,liger,backward,speed,ms,H,h,16384,9.0,0,0,$cfg,GPU,t,v"       # backward: skipped
  echo "rms_norm,huggingface,forward,speed,ms,H,h,16384,9.0,0,0,$cfg,GPU,t,v"  # unfused: skipped
  echo "rms_norm,liger,forward,speed,ms,H,h,1024,9.0,0,0,$cfg,GPU,t,v"         # 8 MB: skipped
} > "$tmp/data.csv"
out="$(python3 "$script" "$tmp/data.csv" --peak-TBps 1)" || fail "a good file exited $?"
echo "$out" | tail -1 | grep -q "^median of 3: 1.000$" || fail "expected the median of 3 runs, 1.000; got: $out"
python3 "$script" "$tmp/data.csv" --peak-TBps 0 2>"$tmp/err"; [ $? -eq 2 ] || fail "peak 0 did not exit 2"
grep -q "peak-TBps" "$tmp/err" || fail "peak 0: no reason"
printf 'a,b\n1,2\n' > "$tmp/other.csv"
python3 "$script" "$tmp/other.csv" --peak-TBps 1 2>"$tmp/err"; [ $? -eq 2 ] || fail "another file's shape did not exit 2"
grep -q "other.csv:2: expected Liger-Kernel's benchmark columns" "$tmp/err" || fail "no file:line: $(cat "$tmp/err")"
python3 "$script" "$tmp/missing.csv" --peak-TBps 1 2>/dev/null; [ $? -eq 2 ] || fail "a missing file did not exit 2"
echo "memory_bound_efficiency_test.sh: ok"
