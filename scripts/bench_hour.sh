#!/usr/bin/env bash
# The best Tatoeba model of an hour on this machine: the quick-start's model shape trained on the dialogue mixture
# (configs/dialogue-cpu.yaml: TVsub's 2M subtitle pairs and the other training corpora), validated on Tatoeba's
# dev set, then fine-tuned on Tatoeba alone (configs/finetune-cpu.yaml at lr_scale 0.25, a peak rate of 1.1e-3,
# decaying as step^-0.5). TOTAL minutes of wall-clock hold everything before scoring: preparing the 2.2M pairs
# (cleaning, tokenizer, token ids), the dialogue stage (what the rest leaves, less a minute for the second stage's
# start) and the FINETUNE minutes. Nothing reads the test set before the end: the fine-tuning's best checkpoint or
# the average of its last 3 is chosen on dev with beam 5, then scored on test. Research only: TVsub is CC BY-NC-ND,
# never ship it or the models this trains.
# Usage, from the project root: bash scripts/bench_hour.sh [RUN_DIR]   (about 65 minutes)
# TOTAL (60), FINETUNE (15), CONFIG (the first stage's recipe, configs/dialogue-cpu.yaml), TUNE_CONFIG (the
# second's, configs/tatoeba-cpu.yaml), DATA (the Tatoeba folder: train, dev and test) and SET (more --set
# KEY=VALUE overrides for both mt train, space-separated, applied last) change the run. The minutes, the choice and
# the scores go, as one record, into benchmarks/results/bench_hour.jsonl (scripts/records.py).
set -euo pipefail
cd "$(dirname "$0")/.."
# the command as run, with the settings the environment gave it
command="$(for name in TOTAL FINETUNE CONFIG TUNE_CONFIG DATA SET; do
  if [ -n "${!name:-}" ]; then printf '%s=%q ' "$name" "${!name}"; fi; done)bash scripts/bench_hour.sh${1:+ $1}"
source scripts/setup.sh
RUN=${1:-runs/hour-$(date +%Y%m%d-%H%M%S)}
TOTAL=${TOTAL:-60}
FINETUNE=${FINETUNE:-15}
CONFIG=${CONFIG:-configs/dialogue-cpu.yaml}
TUNE_CONFIG=${TUNE_CONFIG:-configs/tatoeba-cpu.yaml}
DATA=${DATA:-../shared/data/zh-en/tatoeba}
source scripts/sets.sh
source scripts/choose.sh
source scripts/figures.sh
start=$(date +%s)
minutes_since_start() { python -c "print(round(($(date +%s) - $start) / 60, 2))"; }
first_stage() {  # PREPARED: the minutes TOTAL leaves the dialogue stage after PREPARED minutes, or why none
  local minutes
  minutes=$(python -c "print(round($TOTAL - $FINETUNE - $1 - 1, 3))")
  if python -c "import sys; sys.exit(not $minutes > 0)"; then echo "$minutes"; else
    echo "TOTAL=$TOTAL leaves no time for the dialogue stage ($1 minutes to prepare, FINETUNE=$FINETUNE)"
    return 1
  fi
}
stage=$(first_stage 0) || { echo "$stage"; exit 2; }
dialogue=(-c "$CONFIG" --run-dir "$RUN/dialogue" --set data.dev.path="$DATA/dev")
mt prepare "${dialogue[@]}" "${sets[@]}"
prepared=$(minutes_since_start)
stage=$(first_stage "$prepared") || { echo "$stage"; exit 2; }
echo "prepared in $prepared minutes; the dialogue stage gets $stage minutes"
mt train "${dialogue[@]}" --set train.max_minutes="$stage" --set train.max_steps=1000000 "${sets[@]}"
mt train -c "$TUNE_CONFIG" -c configs/finetune-cpu.yaml --init-from "$RUN/dialogue/checkpoints/best.pt" \
  --run-dir "$RUN/tatoeba" --set data.train.path="$DATA/train" --set data.dev.path="$DATA/dev" \
  --set train.max_minutes="$FINETUNE" --set train.lr_scale=0.25 "${sets[@]}"
trained=$(minutes_since_start)
echo "trained in $trained minutes of wall-clock, preparation included"
mt info "$RUN/tatoeba/checkpoints/best.pt" | sed -n 2,5p
choose "$RUN/tatoeba" "$DATA" 0.6
figures+=(--figure "preparation minutes=$prepared" --figure "dialogue stage minutes=$stage"
          --figure "training minutes, preparation included=$trained" --figure "checkpoint chosen on dev=$chosen.pt")
echo "== Tatoeba test, beam 5"
scores "Tatoeba test, beam 5:" --checkpoint "$RUN/tatoeba/checkpoints/$chosen.pt" --src "$DATA/test.zh" \
  --ref "$DATA/test.en" --beam 5 --alpha "$chosen_alpha"
echo "== the dialogue stage alone ($RUN/dialogue/checkpoints/best.pt), Tatoeba test, beam 5"
scores "the dialogue stage alone, Tatoeba test, beam 5:" --checkpoint "$RUN/dialogue/checkpoints/best.pt" \
  --src "$DATA/test.zh" --ref "$DATA/test.en" --beam 5
title="the best Tatoeba model of $TOTAL minutes: $(basename "$CONFIG"), then $FINETUNE minutes of"
title+=" $(basename "$TUNE_CONFIG")"
python scripts/records.py add --script bench_hour.sh --command "$command" --title "$title${SET:+, $SET}" "${figures[@]}"
