#!/usr/bin/env bash
# The GPU checks, as one short run on a GPU machine, from the project root (data from scripts/gpu_data.sh):
#   1. training speed of configs/base.yaml in bf16 (tokens/s, model-FLOPs utilisation), eager;
#   2. a MINUTES-long base-model training (the paper's schedule) on the shared training corpora, then Tatoeba
#      test BLEU (beam 4); in this session's runs, 3 minutes were too few for the post-LN base model to learn;
#   3. training speed again with torch.compile.
# Results and logs go to $OUT (default gpu-results/). PYTHON, CONFIG and STEPS change the rest.
set -euo pipefail
PY=${PYTHON:-python3}; GPU=${GPU:-.gpu}; OUT=${OUT:-gpu-results}; MINUTES=${MINUTES:-3}
CONFIG=${CONFIG:-configs/base.yaml}; STEPS=${STEPS:-60}
mkdir -p "$OUT"
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

echo "== 1. training speed, eager"
"$PY" scripts/bench_train.py --config "$CONFIG" "${DATA[@]}" --steps "$STEPS" --warmup 150 2>&1 | tee "$OUT/speed-eager.txt"

echo "== 2. $MINUTES minutes on the shared corpora, then the Tatoeba test set"
"$PY" -m mt train -c "$CONFIG" "${DATA[@]}" --set train.max_minutes="$MINUTES" \
  --set train.eval_every=400 --set train.log_every=50 --run-dir /tmp/gpu-run > "$OUT/train.txt" 2>&1
cp /tmp/gpu-run/log.jsonl "$OUT/log.jsonl"
"$PY" -m mt evaluate --checkpoint /tmp/gpu-run/checkpoints/best.pt --output "$OUT/tatoeba-test.en" 2>&1 \
  | tee "$OUT/evaluate.txt"
"$PY" -m mt translate --checkpoint /tmp/gpu-run/checkpoints/best.pt "我爱你" | tee -a "$OUT/evaluate.txt"

echo "== 3. training speed, torch.compile"
"$PY" scripts/bench_train.py --config "$CONFIG" "${DATA[@]}" --set train.compile=true --steps "$STEPS" --warmup 150 \
  2>&1 | tee "$OUT/speed-compiled.txt"
