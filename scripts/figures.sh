# Sourced by the recipes: `figures`, the --figure NAME=VALUE options of the run's record (scripts/records.py), and
# scores NAME MT-EVALUATE-OPTION…: mt evaluate, its output shown and its BLEU and chrF kept as figures.
figures=()
scores() {
  local name=$1 said; shift
  said=$(mt evaluate "$@")
  echo "$said"
  figures+=(--figure "$name BLEU=$(awk '/^BLEU/ {print $2}' <<< "$said")"
            --figure "$name chrF=$(awk '/^chrF/ {print $2}' <<< "$said")")
}
