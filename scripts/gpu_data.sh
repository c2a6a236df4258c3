#!/usr/bin/env bash
# Gathers the shared training corpora into one folder that travels to a GPU machine (which has no ../shared):
# train = Tatoeba train + 3AM train + ALMA news train + AI Challenger sample (no test or dev set);
# dev and test = Tatoeba's. Also the Python wheels that machine lacks (datasets 5.2 and its two helpers).
# Usage, from the project root: bash scripts/gpu_data.sh [.gpu]   (keep the folder out of git)
set -euo pipefail
DEST=${1:-.gpu}
SHARED=../shared/data/zh-en
mkdir -p "$DEST/data" "$DEST/whl"
for lang in zh en; do
  cat "$SHARED/tatoeba/train.$lang" "$SHARED/3am/train.$lang" "$SHARED/alma-news/train.$lang" \
      "$SHARED/aichallenger2017/train_sample.$lang" > "$DEST/data/train.$lang"
  cp "$SHARED/tatoeba/dev.$lang" "$SHARED/tatoeba/test.$lang" "$DEST/data/"
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$DEST/whl" \
  datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
wc -l "$DEST"/data/*.zh
