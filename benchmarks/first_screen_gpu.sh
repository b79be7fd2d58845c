#!/bin/bash
# The first five minutes on the GPU: `kernelpilot examples/softmax` (manual mode, a temporary git copy)
# in tmux at 80x24 and at 120x40, each left running until the problem card shows the baselines (eager
# and torch.compile measured by the evaluation worker), captured with `tmux capture-pane`.
# Run from the repository root, on the GPU machine:  OUT=/some/dir bash benchmarks/first_screen_gpu.sh
# Writes $OUT/first-screen-WxH-{start,baselines}.txt and $OUT/summary.txt; prints the summary last.
# Takes 1-3 minutes (the first run starts the worker, measures the ceilings if not cached, compiles).
# Without tmux it falls back to benchmarks/first_screen_headless.py (Textual headless, same app).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$root/first-screen-out}
mkdir -p "$OUT"
if [ -d "$root/.whl" ] && ! python3 -c "import textual" 2>/dev/null; then  # the image lacks textual: carried wheels
  [ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$root"/.whl/*.whl
fi
export PYTHONPATH="/tmp/site:$root${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import textual, kernelpilot" || { echo "textual or kernelpilot cannot be imported; carry .whl (shared/gpu/wheelhouse.sh)"; exit 2; }

work=$(mktemp -d /tmp/kp-first-screen.XXXXXX)
cp -r "$root/examples/softmax" "$work/softmax"
cd "$work/softmax" || exit 2
git init -q -b main && git -c user.email=kp@example.com -c user.name=kp add -A \
  && git -c user.email=kp@example.com -c user.name=kp commit -q -m "softmax example"
export KERNELPILOT_DATA_DIR="$work/data"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 | sed 's/^/gpu: /'
  python3 -c "import torch, textual; print('torch', torch.__version__, '| textual', textual.__version__)" 2>/dev/null; } > "$OUT/summary.txt"

run_tmux() {  # WIDTH HEIGHT TIMEOUT_S
  local w=$1 h=$2 limit=$3 s="kp-first-$1x$2-$$" t0 now filled="" cap
  tmux new-session -d -s "$s" -x "$w" -y "$h" \
    "env PYTHONPATH='$PYTHONPATH' KERNELPILOT_DATA_DIR='$KERNELPILOT_DATA_DIR' TERM=xterm-256color $(command -v python3) -m kernelpilot problem.py; echo KP_EXIT=\$?; sleep 30"
  t0=$(date +%s)
  while :; do
    now=$(( $(date +%s) - t0 ))
    cap=$(tmux capture-pane -p -t "$s" 2>/dev/null)
    if [ ! -f "$OUT/first-screen-${w}x${h}-start.txt" ] && grep -q "moves " <<<"$cap"; then
      printf '%s\n' "$cap" | sed 's/[[:space:]]*$//' > "$OUT/first-screen-${w}x${h}-start.txt"
      echo "${w}x${h}: card after ${now} s" >> "$OUT/summary.txt"
    fi
    if grep -q "moves " <<<"$cap" && grep -Eq "compile +[0-9.]+ (ms|µs)|baselines not measured|compile +not measured|times need a GPU" <<<"$cap"; then
      filled=$now; break
    fi
    [ "$now" -ge "$limit" ] && break
    sleep 2
  done
  sleep 1
  tmux capture-pane -p -t "$s" | sed 's/[[:space:]]*$//' > "$OUT/first-screen-${w}x${h}-baselines.txt"
  if [ -n "$filled" ]; then echo "${w}x${h}: baselines after ${filled} s"; else echo "${w}x${h}: baselines NOT filled within ${limit} s"; fi >> "$OUT/summary.txt"
  grep -E "▎ +(input|moves|floor|eager|compile|baselines) " "$OUT/first-screen-${w}x${h}-baselines.txt" \
    | sed 's/[│▎]//g; s/^ *//; s/ *$//' | sed "s/^/  ${w}x${h} | /" >> "$OUT/summary.txt"
  tmux send-keys -t "$s" "/quit" Enter
  for _ in $(seq 30); do tmux capture-pane -p -t "$s" 2>/dev/null | grep -q "KP_EXIT=" && break; sleep 1; done
  tmux capture-pane -p -t "$s" | grep -o "KP_EXIT=[0-9]*" | sed "s/^/  ${w}x${h} | /" >> "$OUT/summary.txt"
  tmux kill-session -t "$s" 2>/dev/null
}

if command -v tmux >/dev/null; then
  echo "tmux: $(tmux -V)" >> "$OUT/summary.txt"
  run_tmux 80 24 100
  run_tmux 120 40 70
else
  echo "tmux: not installed here; Textual headless capture instead (benchmarks/first_screen_headless.py)" >> "$OUT/summary.txt"
  python3 "$root/benchmarks/first_screen_headless.py" problem.py 80 24 "$OUT" 100 >> "$OUT/summary.txt" 2>&1
  python3 "$root/benchmarks/first_screen_headless.py" problem.py 120 40 "$OUT" 70 >> "$OUT/summary.txt" 2>&1
  for f in "$OUT"/card-*.txt; do sed "s/^/  $(basename "$f" .txt) | /" "$f" >> "$OUT/summary.txt"; done
fi
echo "=== first screen on the GPU ==="
cat "$OUT/summary.txt"
