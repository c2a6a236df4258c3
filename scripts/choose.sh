# Sourced by the recipes that choose their model on dev: `choose RUN DATA ALPHA…` averages RUN's last 3 step
# checkpoints (the 2 that a short run gave; with one, best.pt alone), scores best.pt and the average on DATA's dev
# set with beam 5 at each length penalty, and sets `chosen` (best or average) and `chosen_alpha`.
choose() {
  local run=$1 data=$2; shift 2
  local steps checkpoint alpha bleu best_bleu=-1 candidates=best
  steps=$(find "$run/checkpoints" -name 'step-*.pt' | wc -l)
  if (( steps >= 2 )); then
    mt average "$run" --last $(( steps < 3 ? steps : 3 ))
    candidates="best average"
  fi
  for checkpoint in $candidates; do
    for alpha in "$@"; do
      bleu=$(mt evaluate --checkpoint "$run/checkpoints/$checkpoint.pt" --src "$data/dev.zh" --ref "$data/dev.en" \
             --beam 5 --alpha "$alpha" | awk '/^BLEU/ {print $2}')
      [ -n "$bleu" ] || { echo "mt evaluate gave no BLEU for $checkpoint.pt"; return 1; }
      echo "dev BLEU, $checkpoint.pt, beam 5, alpha $alpha: $bleu"
      if python -c "import sys; sys.exit(not $bleu > $best_bleu)"; then
        best_bleu=$bleu; chosen=$checkpoint; chosen_alpha=$alpha
      fi
    done
  done
  echo "chosen on dev: $chosen.pt, alpha $chosen_alpha"
}
