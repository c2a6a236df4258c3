#!/usr/bin/env bash
# The quality benchmark: the quick-start recipe (configs/tatoeba-cpu.yaml) trained for exactly 20 minutes of
# wall-clock on this machine, then scored on the Tatoeba test set with sacreBLEU (13a). Nothing reads the test
# set before the end: the checkpoint (best by dev BLEU, or the average of the last 3) and the length penalty
# (0.6 or 1.0) are chosen on the dev set with beam 5. Also prints greedy scores and the number of greedy outputs
# that loop (a word or a pair of words three times in a row), plain (--no-repeat-ngram 0) and with the recipe's
# decode settings (which the beam search uses too), and the translation of 我爱你.
# Usage, from the project root: bash scripts/bench_quality.sh [RUN_DIR]   (about 25 minutes)
# MINUTES (default 20), CONFIG (configs/tatoeba-cpu.yaml), DATA (the Tatoeba folder whose dev and test sets score
# it), ALPHAS (the length penalties tried on dev, "0.6 1.0") and SET (more --set KEY=VALUE overrides for mt train,
# space-separated) change the run, e.g. a two-minute check of the script:
#   MINUTES=1 ALPHAS=0.6 SET="train.eval_every=100" bash scripts/bench_quality.sh /tmp/quality
# The scores, the loops, the updates and the choice go, as one record, into benchmarks/results/bench_quality.jsonl
# (scripts/records.py).
set -euo pipefail
cd "$(dirname "$0")/.."
# the command as run, with the settings the environment gave it
command="$(for name in MINUTES CONFIG DATA ALPHAS SET; do
  if [ -n "${!name:-}" ]; then printf '%s=%q ' "$name" "${!name}"; fi; done)bash scripts/bench_quality.sh${1:+ $1}"
source scripts/setup.sh
RUN=${1:-runs/quality-$(date +%Y%m%d-%H%M%S)}
MINUTES=${MINUTES:-20}
CONFIG=${CONFIG:-configs/tatoeba-cpu.yaml}
DATA=${DATA:-../shared/data/zh-en/tatoeba}
ALPHAS=${ALPHAS:-0.6 1.0}
source scripts/sets.sh
source scripts/choose.sh
source scripts/figures.sh
# Stopped by the clock, the run has no last update to decay to: it takes the paper's decay.
mt train -c "$CONFIG" --run-dir "$RUN" --set train.max_minutes="$MINUTES" --set train.max_steps=1000000 \
  --set train.decay=inverse_sqrt --set train.keep_last=3 "${sets[@]}"
info=$(mt info "$RUN/checkpoints/best.pt" | sed -n 2,5p)
echo "$info"
read -r _ updates <<< "$(grep '^step:' <<< "$info")"
choose "$RUN" "$DATA" $ALPHAS
CKPT="$RUN/checkpoints/$chosen.pt"
figures+=(--figure "updates=${updates//,/}" --figure "checkpoint chosen on dev=$chosen.pt"
          --figure "length penalty chosen on dev=$chosen_alpha")
echo "== Tatoeba test, beam 5, alpha $chosen_alpha"
scores "test, beam 5:" --checkpoint "$CKPT" --src "$DATA/test.zh" --ref "$DATA/test.en" --beam 5 \
  --alpha "$chosen_alpha"
count_loops() {  # NAME FILE: how many lines repeat a word or a pair of words three times in a row, kept as a figure
  local said looping
  said=$(python - "$2" <<'EOF'
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
def loops(line: str) -> bool:
    words = re.findall(r"\w+", line.lower())
    return any(words[i:i + n] * 2 == words[i + n:i + 3 * n] for n in (1, 2) for i in range(len(words)))
looping = [line for line in lines if loops(line)]
print(f"greedy outputs that loop: {len(looping)} of {len(lines)}" + (f", e.g. {looping[0]!r}" if looping else ""))
EOF
)
  echo "$said"
  read -r _ _ _ _ looping _ <<< "$said"
  figures+=(--figure "$1=$looping")
}
echo "== Tatoeba test, greedy"
scores "test, greedy:" --checkpoint "$CKPT" --src "$DATA/test.zh" --ref "$DATA/test.en" --beam 1 \
  --no-repeat-ngram 0 --output "$RUN/test.greedy.en"
count_loops "test, greedy: outputs that loop" "$RUN/test.greedy.en"
echo "== Tatoeba test, greedy, with the recipe's decode.no_repeat_ngram_size"
scores "test, greedy, the recipe's no_repeat_ngram_size:" --checkpoint "$CKPT" --src "$DATA/test.zh" \
  --ref "$DATA/test.en" --beam 1 --output "$RUN/test.greedy-recipe.en"
count_loops "test, greedy, the recipe's no_repeat_ngram_size: outputs that loop" "$RUN/test.greedy-recipe.en"
echo "== 我爱你 (beam 5)"
translation=$(mt translate --checkpoint "$CKPT" --beam 5 --alpha "$chosen_alpha" "我爱你")
echo "$translation"
python scripts/records.py add --script bench_quality.sh --command "$command" \
  --title "quality: $(basename "$CONFIG") trained $MINUTES minutes${SET:+, $SET}" "${figures[@]}" \
  --figure "我爱你 (beam 5)=$translation"
