#!/usr/bin/env bash
# Building on models you have (issue 18), each measured on Tatoeba test and NTREX-128 with beam 5 (BLEU / chrF with
# sacreBLEU's signatures). Run from the project root, one part at a time:
#   bash scripts/bench_build_on.sh finetune DIALOGUE_RUN  # DIALOGUE_RUN from scripts/bench_dialogue.sh (70 min);
#                                                         # 10 more minutes on Tatoeba, TVsub dev before and after
#   bash scripts/bench_build_on.sh ensemble               # 3 quick-start models (seeds 1, 2, 3), each alone and
#                                                         # the 3 ensembled, with their decoding time
#   bash scripts/bench_build_on.sh subword ALPHA          # the quick-start with tokenizer.sampling_alpha ALPHA
#                                                         # (seed 1 of `ensemble` is ALPHA 0; dev scores to choose)
#   bash scripts/bench_build_on.sh distill [MONO]         # `ensemble`'s 3 models as the teacher of Tatoeba's
#                                                         # training sources (mt distill, beam 4); the students
#                                                         # student-base (from scratch) and student-tiny (from
#                                                         # the first teacher's layers) train on its pairs (and
#                                                         # on its translations of MONO, monolingual Chinese, when
#                                                         # given) for the recipe's updates; Tatoeba test of each
#                                                         # beside the teacher and seed 1 (the same updates on the
#                                                         # human pairs), then the students' decoding speed
#                                                         # against seed 1's (bench_decode.py, each engine;
#                                                         # student-tiny with its `mt shortlist` too)
#   bash scripts/bench_build_on.sh distill-member         # the teacher's first model (seed 1 of the ensemble) goes
#                                                         # on for the recipe's updates, on the teacher's pairs
#                                                         # (a student of its shape that starts from a member)
#                                                         # and, to compare, on the human pairs; Tatoeba test and
#                                                         # dev of each beside the teacher and the member alone
#   bash scripts/bench_build_on.sh distill-mixed [MONO]   # as distill, but the students train on the human pairs
#                                                         # beside the teacher's, and on its translations of MONO
#                                                         # (monolingual Chinese it never saw) when given
#   bash scripts/bench_build_on.sh backtranslate [MONO]  # a reverse (en → zh) quick-start model turns MONO's
#                                                         # English (3AM's train.en) into synthetic pairs, by
#                                                         # sampling and by beam 4 (mt distill); each set, tagged
#                                                         # <BT>, joins Tatoeba for the recipe's updates; Tatoeba
#                                                         # test and dev beside seed 1 (the same updates without)
# Results go under runs/build-on/. The quick-start models train its 2,400 updates (about 30 minutes each on 2
# cores) rather than for 20 minutes of wall-clock, so that they are the same on any machine and under any load:
# set OMP_NUM_THREADS=1 and run two parts side by side. The fine-tuning's 10 minutes and its 20-minute
# Tatoeba-only baseline are wall-clock, as the issue asks: run nothing beside them.
# OUT (default runs/build-on), CONFIG (the recipe, configs/tatoeba-cpu.yaml), STEPS (its updates, 2400), MINUTES
# (the Tatoeba-only baseline's, 20), DATA (the folder of tatoeba/ and ntrex128/, ../shared/data/zh-en), DEV (the
# detokenised TVsub dev set's folder, data/tvsub) and SET (more --set KEY=VALUE overrides for every mt train,
# space-separated) change the runs; TEACHER (checkpoints, space-separated, from the project root) teaches in the
# distill parts instead of the ensemble, e.g. the model of scripts/bench_hour.sh (give it an OUT of its own: a
# distilled folder keeps one teacher); TINY_STEPS (default STEPS) the updates of student-tiny; DISTILL (more mt
# distill options, e.g. "--top-k 10", in the distill parts and backtranslate), SENTENCES (1444), REPEATS (3) and
# ENGINES (bench_decode.py's, comma-separated, e.g. "mt,ctranslate2 int8"; default: every one) the distill part's
# timing. A short check of a part:
#   OUT=/tmp/build-on STEPS=100 SET="train.eval_every=50" bash scripts/bench_build_on.sh subword 0.1
# A part's scores and times go, as one record, into benchmarks/results/bench_build_on.jsonl (scripts/records.py);
# the distill part's decoding speed into bench_decode.jsonl, as scripts/bench_decode.py records it.
set -euo pipefail
cd "$(dirname "$0")/.."
# the command as run, with the settings the environment gave it
command="$(for name in OUT CONFIG STEPS TINY_STEPS MINUTES DATA DEV TEACHER DISTILL SENTENCES REPEATS ENGINES SET; do
  if [ -n "${!name:-}" ]; then printf '%s=%q ' "$name" "${!name}"; fi; done)bash scripts/bench_build_on.sh${*:+ $*}"
source scripts/setup.sh
OUT=${OUT:-runs/build-on}
CONFIG=${CONFIG:-configs/tatoeba-cpu.yaml}
STEPS=${STEPS:-2400}
TINY_STEPS=${TINY_STEPS:-$STEPS}
MINUTES=${MINUTES:-20}
DATA=${DATA:-../shared/data/zh-en}
DEV=${DEV:-data/tvsub}
source scripts/sets.sh
read -ra distill_options <<< "${DISTILL:-}"
IFS=, read -ra engines <<< "${ENGINES:-}"
mkdir -p "$OUT"
figures=()  # --figure NAME=VALUE options for the record

score_on() {  # LABEL SRC REF NAME CHECKPOINT... [-- OPTION...]: one test set, beam 5, and how long it took
  local label=$1 src=$2 ref=$3 name=$4; shift 4
  local models=() said seconds
  while [ $# -gt 0 ] && [ "$1" != -- ]; do models+=(--checkpoint "$1"); shift; done
  [ $# -gt 0 ] && shift  # the --
  local start=$SECONDS
  echo "== $name, $label, beam 5"
  said=$(mt evaluate "${models[@]}" --src "$src" --ref "$ref" --beam 5 "$@")
  seconds=$((SECONDS - start))
  echo "$said"
  echo "   ($seconds s to translate and score $(wc -l < "$src") lines)"
  figures+=(--figure "$name, $label: BLEU=$(awk '/^BLEU/ {print $2}' <<< "$said")"
            --figure "$name, $label: chrF=$(awk '/^chrF/ {print $2}' <<< "$said")"
            --figure "$name, $label: seconds=$seconds")
}

tatoeba() {  # SPLIT LABEL NAME CHECKPOINT... : score_on a Tatoeba split
  local split=$1; shift
  score_on "$1" "$DATA/tatoeba/$split.zh" "$DATA/tatoeba/$split.en" "${@:2}"
}

score() {  # NAME CHECKPOINT... : Tatoeba test and NTREX-128
  tatoeba test tatoeba "$@"
  score_on ntrex128 "$DATA/ntrex128/ntrex128.zho-CN.zh" "$DATA/ntrex128/ntrex128.eng.en" "$@"
}

recipe() {  # RUN [--set …]: the quick-start recipe (STEPS updates), unless RUN has finished it
  local run=$1; shift
  [ -f "$run/checkpoints/step-$(printf %08d "$STEPS").pt" ] || mt train -c "$CONFIG" --run-dir "$run" \
    --set train.max_steps="$STEPS" "${sets[@]}" "$@" $([ -f "$run/checkpoints/last.pt" ] && echo --resume)
}

baseline() {  # seed 1 of the recipe on the human pairs (trained first if need be): what students must beat
  recipe "$OUT/seed1" --set train.seed=1
  seed1=$OUT/seed1/checkpoints/best.pt
}

teach() {  # SOURCES DIR: the teacher (TEACHER, or the ensemble of seeds 1, 2, 3) translates SOURCES into DIR
  teachers=()
  if [ -n "${TEACHER:-}" ]; then
    read -ra teachers <<< "$TEACHER"
    teacher="teacher: $TEACHER"
  else
    for seed in 1 2 3; do
      recipe "$OUT/seed$seed" --set train.seed=$seed
      teachers+=("$OUT/seed$seed/checkpoints/best.pt")
    done
    teacher="teacher: ensemble of seeds 1, 2, 3"
  fi
  local start=$SECONDS
  mt distill "${teachers[@]/#/--teacher=}" -s "$1" -o "$2" "${distill_options[@]}"
  echo "== the teacher translated $(wc -l < "$1") sources in $((SECONDS - start)) s" \
       "(less where a previous run had translated them)"
  figures+=(--figure "the teacher's translation into $(basename "$2"): seconds=$((SECONDS - start))")
}

case ${1:-} in
  finetune)
    dialogue=${2:?give the dialogue run directory (scripts/bench_dialogue.sh makes one)}
    [ -d "$DEV" ] || { echo "$DEV missing: scripts/bench_dialogue.sh makes it"; exit 2; }
    [ -f "$OUT/adapted/checkpoints/last.pt" ] || mt train -c "$CONFIG" -c configs/finetune-cpu.yaml "${sets[@]}" \
      --init-from "$dialogue/checkpoints/best.pt" --run-dir "$OUT/adapted"
    [ -f "$OUT/tatoeba-only/checkpoints/last.pt" ] || mt train -c "$CONFIG" "${sets[@]}" \
      --run-dir "$OUT/tatoeba-only" --set train.max_minutes="$MINUTES" --set train.max_steps=1000000
    for model in "$dialogue" "$OUT/adapted" "$OUT/tatoeba-only"; do
      score "$model" "$model/checkpoints/best.pt"
      score_on "TVsub dev (detokenised references)" "$DEV/dev.zh" "$DEV/dev.en" "$model" "$model/checkpoints/best.pt"
    done ;;
  ensemble)
    for seed in 1 2 3; do
      recipe "$OUT/seed$seed" --set train.seed=$seed
      score "seed $seed" "$OUT/seed$seed/checkpoints/best.pt"
    done
    score "ensemble of seeds 1, 2, 3" "$OUT"/seed{1,2,3}/checkpoints/best.pt ;;
  distill)
    mono=${2:-}
    teach "$DATA/tatoeba/train.zh" "$OUT/distilled"
    # with MONO: the teacher's translations of it too, and its Tatoeba pairs twice an epoch (MONO may be several
    # times their number)
    more=(); students=$OUT/student
    if [ -n "$mono" ]; then
      teach "$mono" "$OUT/distilled-mono"
      more=(--set data.train.repeat=2 --set "data.extra_train=[{path: $OUT/distilled-mono/train}]")
      students=$OUT/student-mono
    fi
    baseline
    recipe "$students-base" -c configs/student-base.yaml --set data.train.path="$OUT/distilled/train" "${more[@]}"
    STEPS=$TINY_STEPS recipe "$students-tiny" -c configs/student-tiny.yaml --init-from "${teachers[0]}" \
      --set data.train.path="$OUT/distilled/train" "${more[@]}"
    tiny=$students-tiny/checkpoints/best.pt
    mt shortlist --checkpoint "$tiny" -o "$students-tiny/shortlist.pt"
    tatoeba test tatoeba "$teacher" "${teachers[@]}"
    tatoeba test tatoeba "seed 1: the students' recipe on the human pairs" "$seed1"
    tatoeba test tatoeba "student-base" "$students-base/checkpoints/best.pt"
    tatoeba test tatoeba "student-tiny" "$tiny"
    tatoeba test tatoeba "student-tiny with its shortlist" "$tiny" -- --shortlist "$students-tiny/shortlist.pt"
    echo "== decoding speed on Tatoeba test, seed 1's shape against the students'"
    python scripts/bench_decode.py --real-only --src "$DATA/tatoeba/test.zh" --sentences "${SENTENCES:-1444}" \
      --repeats "${REPEATS:-3}" --checkpoint "$seed1" --checkpoint "$students-base/checkpoints/best.pt" \
      --checkpoint "$tiny" --shortlist "$students-tiny/shortlist.pt" ${ENGINES:+--engines "${engines[@]}"} ;;
  distill-member)
    teach "$DATA/tatoeba/train.zh" "$OUT/distilled"
    recipe "$OUT/member-distilled" --init-from "${teachers[0]}" --set data.train.path="$OUT/distilled/train"
    recipe "$OUT/member-human" --init-from "${teachers[0]}"
    for split in test dev; do
      tatoeba "$split" "tatoeba $split" "$teacher" "${teachers[@]}"
      tatoeba "$split" "tatoeba $split" "the teacher's first model" "${teachers[0]}"
      tatoeba "$split" "tatoeba $split" "the first model, on with the teacher's pairs" \
        "$OUT/member-distilled/checkpoints/best.pt"
      tatoeba "$split" "tatoeba $split" "the first model, on with the human pairs" \
        "$OUT/member-human/checkpoints/best.pt"
    done ;;
  distill-mixed)
    mono=${2:-}
    teach "$DATA/tatoeba/train.zh" "$OUT/distilled"
    baseline
    corpora="{path: $OUT/distilled/train}"
    if [ -n "$mono" ]; then
      teach "$mono" "$OUT/distilled-mono"
      corpora+=", {path: $OUT/distilled-mono/train}"
    fi
    recipe "$OUT/student-base-mixed" -c configs/student-base.yaml \
      --set "data.train.path=$DATA/tatoeba/train" --set "data.extra_train=[$corpora]"
    STEPS=$TINY_STEPS recipe "$OUT/student-tiny-mixed" -c configs/student-tiny.yaml --init-from "${teachers[0]}" \
      --set "data.train.path=$DATA/tatoeba/train" --set "data.extra_train=[$corpora]"
    for split in test dev; do
      tatoeba "$split" "tatoeba $split" "$teacher" "${teachers[@]}"
      tatoeba "$split" "tatoeba $split" "seed 1: the students' recipe on the human pairs" "$seed1"
      for student in base tiny; do
        tatoeba "$split" "tatoeba $split" "student-$student on the human and the teacher's pairs" \
          "$OUT/student-$student-mixed/checkpoints/best.pt"
      done
    done ;;
  backtranslate)
    mono=${2:-$DATA/3am/train.en}
    baseline
    recipe "$OUT/en-zh" --set data.src_lang=en --set data.tgt_lang=zh
    for mode in sampling beam; do
      options=(--beam 4); [ "$mode" = sampling ] && options=(--sample --seed 1)
      mt distill --teacher "$OUT/en-zh/checkpoints/best.pt" -s "$mono" -o "$OUT/bt-$mode" "${options[@]}" \
        "${distill_options[@]}"
      recipe "$OUT/zh-en-bt-$mode" \
        --set "data.extra_train=[{path: $OUT/bt-$mode/train, tag: <BT>, synthetic: true}]"
    done
    for model in "seed 1, Tatoeba alone:seed1" "back-translated by sampling:zh-en-bt-sampling" \
                 "back-translated by beam 4:zh-en-bt-beam"; do
      for split in test dev; do
        tatoeba "$split" "tatoeba $split" "${model%%:*}" "$OUT/${model##*:}/checkpoints/best.pt"
      done
    done ;;
  subword)
    alpha=${2:?give tokenizer.sampling_alpha, e.g. 0.1 (0: the recipe as it is)}
    recipe "$OUT/subword-$alpha" --set tokenizer.sampling_alpha="$alpha"
    tatoeba dev "tatoeba dev" "sampling_alpha $alpha" "$OUT/subword-$alpha/checkpoints/best.pt"
    score "sampling_alpha $alpha" "$OUT/subword-$alpha/checkpoints/best.pt" ;;
  *)
    sed -n 2,45p "$0"; exit 2 ;;
esac
python scripts/records.py add --script bench_build_on.sh --command "$command" \
  --title "building on models: $*, $(basename "$CONFIG")${SET:+, $SET}, beam 5" "${figures[@]}"
