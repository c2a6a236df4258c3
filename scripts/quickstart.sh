#!/usr/bin/env bash
# The main job, end to end on a CPU: set up, train the Tatoeba config, translate "我爱你", evaluate on the test set.
# Data comes from ../shared/data when it is there, else from the Hugging Face hub (OPUS-100 en-zh).
# Running it again continues (or reuses) the finished run instead of starting over. A run that trained records its
# time and scores in benchmarks/results/quickstart.jsonl (scripts/records.py).
# CONFIG (default configs/tatoeba-cpu.yaml), RUN_DIR (default runs/tatoeba-cpu) and SET (more --set KEY=VALUE
# overrides for mt train, space-separated) change the recipe, e.g. a short check of the script:
#   RUN_DIR=/tmp/qs SET="train.max_steps=20 train.eval_every=10" bash scripts/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

CONFIG=${CONFIG:-configs/tatoeba-cpu.yaml}
configs=(-c "$CONFIG")
run_dir=${RUN_DIR:-runs/tatoeba-cpu}
if [ ! -d ../shared/data/zh-en/tatoeba ]; then
  echo "../shared/data/zh-en/tatoeba not found: training on OPUS-100 en-zh from the Hugging Face hub instead"
  configs+=(-c configs/hub-opus100.yaml)
  run_dir=${RUN_DIR:-runs/opus100-cpu}
fi
source scripts/sets.sh
resume=()
[ -f "$run_dir/checkpoints/last.pt" ] && resume=(--resume)

started=$SECONDS
mt train "${configs[@]}" --run-dir "$run_dir" "${sets[@]}" "${resume[@]}"
trained=$((SECONDS - started))
echo
echo '$ mt translate "我爱你"'
translation=$(mt translate --checkpoint "$run_dir/checkpoints/best.pt" "我爱你")
echo "$translation"
echo
echo "$ mt evaluate   (the config's test set; beam 4, length penalty 0.6)"
mt evaluate --checkpoint "$run_dir/checkpoints/best.pt" --output "$run_dir/test.hyp.en" | tee "$run_dir/test.scores"
if [ ${#resume[@]} -eq 0 ]; then  # a run that continued a previous one has no whole time of its own
  read -r _ bleu _ < <(grep '^BLEU' "$run_dir/test.scores")
  read -r _ chrf _ < <(grep '^chrF' "$run_dir/test.scores")
  python scripts/records.py add --script quickstart.sh --title "the quick-start: $(basename "$CONFIG") ${SET:-}" \
    --command "${SET:+SET=\"$SET\" }bash scripts/quickstart.sh" --figure "training seconds=$trained" \
    --figure "test BLEU (beam 4)=$bleu" --figure "test chrF (beam 4)=$chrf" \
    --figure "我爱你=$translation"
fi
