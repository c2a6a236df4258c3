#!/usr/bin/env bash
# Runs a command as on an x86 CPU that stops at AVX2 (no AVX-512, bf16, VNNI or AMX), on a CPU that has more: every
# library that picks its kernels by the CPU's flags is capped at AVX2, torch's own kernels (ATen), oneDNN (torch's
# bf16 products, mt's decoding products), Intel MKL (fp32 products) and CTranslate2, so mt's train.precision auto
# trains in fp32 as it does there. The cores stay what they are (caches, clock, AVX2 instructions issued a cycle),
# so a figure taken this way is labelled "AVX2-capped" with the CPU it ran on. CTranslate2's --compute-type auto
# still sees the real CPU's AVX-512 and stays float32, where a real AVX2-only AMD CPU takes int8. Example:
#   bash scripts/avx2.sh python scripts/bench_train.py --precision auto
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 CT2_FORCE_CPU_ISA=AVX2
exec "$@"
