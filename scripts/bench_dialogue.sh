#!/usr/bin/env bash
# The dialogue benchmark: configs/dialogue-cpu.yaml (TVsub's 2M subtitle pairs plus the other training corpora)
# trained for 60 minutes of wall-clock, then scored with beam 5 on TVsub's dev set and on the Tatoeba test set.
# TVsub's dev references are tokenised and escaped ("it &apos;s"), so they are detokenised first (sacremoses,
# the Moses detokeniser) into data/tvsub/, which the config validates on. Research only: TVsub is CC BY-NC-ND,
# never ship it or the model this trains.
# Usage, from the project root: bash scripts/bench_dialogue.sh [RUN_DIR]   (about 70 minutes)
# MINUTES (default 60), CONFIG (configs/dialogue-cpu.yaml), TVSUB (the folder of TVsub's dev set), DEV (where its
# detokenised copy goes and the run validates on, data/tvsub), TATOEBA (the folder of the Tatoeba test set) and SET
# (more --set KEY=VALUE overrides for mt train, space-separated) change the run, e.g. a short check of the script:
#   MINUTES=1 SET="train.eval_every=100" bash scripts/bench_dialogue.sh /tmp/dialogue
# The scores and the translation go, as one record, into benchmarks/results/bench_dialogue.jsonl (scripts/records.py).
set -euo pipefail
cd "$(dirname "$0")/.."
# the command as run, with the settings the environment gave it
command="$(for name in MINUTES CONFIG TVSUB DEV TATOEBA SET; do
  if [ -n "${!name:-}" ]; then printf '%s=%q ' "$name" "${!name}"; fi; done)bash scripts/bench_dialogue.sh${1:+ $1}"
source scripts/setup.sh
python -c "import sacremoses" 2>/dev/null || pip install -qq -e ".[bench]"
RUN=${1:-runs/dialogue-$(date +%Y%m%d-%H%M%S)}
MINUTES=${MINUTES:-60}
CONFIG=${CONFIG:-configs/dialogue-cpu.yaml}
TVSUB=${TVSUB:-../shared/data/zh-en/tvsub}
DEV=${DEV:-data/tvsub}
TATOEBA=${TATOEBA:-../shared/data/zh-en/tatoeba}
source scripts/sets.sh
source scripts/figures.sh
mkdir -p "$DEV"
cp "$TVSUB/dev.zh" "$DEV/dev.zh"
python - "$TVSUB/dev.en" "$DEV/dev.en" <<'PY'
import sys
from sacremoses import MosesDetokenizer
detokenize = MosesDetokenizer(lang="en").detokenize  # also unescapes &apos; &quot; &amp; …
with open(sys.argv[1], encoding="utf-8") as source, open(sys.argv[2], "w", encoding="utf-8") as target:
    for line in source:
        target.write(detokenize(line.split()) + "\n")
PY
echo "TVsub dev references, detokenised: $(head -1 "$DEV/dev.en")"
mt train -c "$CONFIG" --run-dir "$RUN" --set train.max_minutes="$MINUTES" --set data.dev.path="$DEV/dev" "${sets[@]}"
CKPT="$RUN/checkpoints/best.pt"
echo "== TVsub dev (detokenised references), beam 5"
scores "TVsub dev, beam 5:" --checkpoint "$CKPT" --src "$DEV/dev.zh" --ref "$DEV/dev.en" --beam 5
echo "== Tatoeba test, beam 5"
scores "Tatoeba test, beam 5:" --checkpoint "$CKPT" --src "$TATOEBA/test.zh" --ref "$TATOEBA/test.en" --beam 5
echo "== 我爱你 (beam 5)"
translation=$(mt translate --checkpoint "$CKPT" --beam 5 "我爱你")
echo "$translation"
python scripts/records.py add --script bench_dialogue.sh --command "$command" \
  --title "dialogue: $(basename "$CONFIG") trained $MINUTES minutes${SET:+, $SET}" "${figures[@]}" \
  --figure "我爱你 (beam 5)=$translation"
