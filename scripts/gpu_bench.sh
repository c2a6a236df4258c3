#!/usr/bin/env bash
# The GPU checks, as one short run on a GPU machine, from the project root (data from scripts/gpu_data.sh).
# STAGES chooses among them, in order (default: the three speed stages):
#   eager     training speed of configs/base.yaml in bf16, eager, 25,000-token batches (tokens/s, MFU);
#   big       the same with 100,000-token batches: four times the work per kernel launch;
#   compiled  torch.compile over length buckets of fixed shape, replayed as CUDA graphs (reduce-overhead);
#   train     a MINUTES-long base-model training on the shared corpora, then Tatoeba test BLEU (beam 4), with the
#             CPU recipe's changes (N(0, 0.02²) weights, peak learning rate 2e-3, clipping at 1) and 1,000 warm-up
#             updates: with the paper's 4,000 and 7e-4, a 3-minute run has not begun to learn.
# Results and logs go to $OUT (default gpu-results/). PYTHON, CONFIG, STEPS, WARMUP and MINUTES change the rest;
# a speed stage that runs past STAGE_SECONDS (default 420: compiling four shapes may be slow) is stopped and said so.
# Records (scripts/records.py) go to $OUT/results/ unless MT_RESULTS names another folder: each speed stage's
# bench_train.py record, and one gpu_bench.sh record of every stage's figures.
set -euo pipefail
# the command as run, with the settings the environment gave it
command="$(for name in PYTHON GPU OUT MINUTES CONFIG STEPS STAGES WARMUP STAGE_SECONDS; do
  if [ -n "${!name:-}" ]; then printf '%s=%q ' "$name" "${!name}"; fi; done)bash scripts/gpu_bench.sh"
PY=${PYTHON:-python3}; GPU=${GPU:-.gpu}; OUT=${OUT:-gpu-results}; MINUTES=${MINUTES:-5}
CONFIG=${CONFIG:-configs/base.yaml}; STEPS=${STEPS:-60}; STAGES=${STAGES:-eager big compiled}
WARMUP=${WARMUP:-150}; STAGE_SECONDS=${STAGE_SECONDS:-420}
for stage in $STAGES; do  # a misspelt stage stops the run before any machine time is spent
  case $stage in
    eager|big|compiled|train) ;;
    *) echo "unknown stage $stage (eager, big, compiled, train)" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
export MT_RESULTS=${MT_RESULTS:-$OUT/results}
figures=()  # --figure NAME=VALUE options for the record
if [ -d "$GPU/whl" ]; then  # packages the GPU machine's image lacks
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$GPU"/whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
D=$GPU/data
DATA=(--set data.train.path=$D/train --set data.dev.path=$D/dev --set 'data.train.hub=""' --set 'data.dev.hub=""' --set data.test.path=$D/test
      --set tokenizer.vocab_size=16000 --set data.max_len=128 --set train.num_workers=4)
(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "no GPU") | tee "$OUT/gpu.txt"
"$PY" -c "import torch, datasets; print('torch', torch.__version__, 'datasets', datasets.__version__)"

speed() {  # speed NAME [--set KEY=VALUE ...]: bench_train.py on the config, into $OUT/speed-NAME.txt
  local name=$1 rc=0; shift
  echo "== speed: $name"
  timeout "$STAGE_SECONDS" "$PY" scripts/bench_train.py --config "$CONFIG" "${DATA[@]}" "$@" --steps "$STEPS" \
    --warmup "$WARMUP" 2>&1 | tee "$OUT/speed-$name.txt" || rc=$?
  if [ "$rc" = 0 ]; then  # the figures of the record bench_train.py appended
    read -r tokens mfu memory < <("$PY" -c 'import json, sys
row = json.loads(open(sys.argv[1]).read().splitlines()[-1])["figures"][0]
print(row["target tokens/s"], row["MFU %"], row["peak memory MB"])' "$MT_RESULTS/bench_train.jsonl")
    figures+=(--figure "$name: target tokens/s=$tokens" --figure "$name: MFU %=$mfu"
              --figure "$name: peak memory MB=$memory")
  else
    echo "== $name: exit status $rc (124: stopped after $STAGE_SECONDS s)" | tee -a "$OUT/speed-$name.txt"
    figures+=(--figure "$name: exit status=$rc")
  fi
}

for stage in $STAGES; do
  case $stage in
    eager) speed eager ;;
    big) speed big --set train.max_tokens=100000 ;;
    compiled) speed compiled --set train.compile=true --set train.compile_mode=reduce-overhead \
                --set 'train.length_buckets=[16,32,64,128]' ;;
    train)
      echo "== train: $MINUTES minutes on the shared corpora, then the Tatoeba test set"
      "$PY" -m mt train -c "$CONFIG" "${DATA[@]}" --set train.max_minutes="$MINUTES" --set model.init_std=0.02 \
        --set train.warmup_steps=1000 --set train.lr_scale=1.43 --set train.clip_grad_norm=1.0 \
        --set train.eval_every=400 --set train.log_every=50 --run-dir /tmp/gpu-run > "$OUT/train.txt" 2>&1
      cp /tmp/gpu-run/log.jsonl "$OUT/log.jsonl"
      "$PY" -m mt evaluate --checkpoint /tmp/gpu-run/checkpoints/best.pt --output "$OUT/tatoeba-test.en" 2>&1 \
        | tee "$OUT/evaluate.txt"
      translation=$("$PY" -m mt translate --checkpoint /tmp/gpu-run/checkpoints/best.pt "我爱你")
      echo "$translation" | tee -a "$OUT/evaluate.txt"
      updates=$("$PY" -c 'import json, sys
print(max(json.loads(line).get("step", 0) for line in open(sys.argv[1])))' "$OUT/log.jsonl")
      figures+=(--figure "train: updates in $MINUTES minutes=$updates"
                --figure "train: test BLEU (beam 4)=$(awk '/^BLEU/ {print $2}' "$OUT/evaluate.txt")"
                --figure "train: test chrF (beam 4)=$(awk '/^chrF/ {print $2}' "$OUT/evaluate.txt")"
                --figure "train: 我爱你=$translation") ;;
  esac
done
"$PY" scripts/records.py add --script gpu_bench.sh --command "$command" "${figures[@]}" \
  --title "the GPU checks: $STAGES, $(basename "$CONFIG")"
