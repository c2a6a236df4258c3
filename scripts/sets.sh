# Sourced by the recipes: SET="KEY=VALUE …" from the environment → the array `sets` of `--set KEY=VALUE` options
# for mt train. read, not $SET unquoted: a value such as data.filters=[] is no file pattern.
read -ra words <<< "${SET:-}"
sets=(); for word in "${words[@]}"; do sets+=(--set "$word"); done
