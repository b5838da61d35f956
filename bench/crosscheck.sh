#!/bin/bash
# crosscheck.sh [--big] [--preset NAME]...: checks hybrid's synthetic models
# against llama.cpp.
#
# 1. For every synth type, writes stories15m (with --big also tinyllama-1.1b
#    for Q4_0 Q4_K_M Q8_0 F16, and llama-3.2-1b, with Llama 3's vocabulary
#    and rope factors, for Q8_0 Q4_K_M F16, and smollm2-135m, qwen2.5-0.5b
#    and qwen3-0.6b (F16 Q8_0 Q4_K_M Q2_K Q3_K IQ4_NL IQ4_XS, with the GPT-2
#    and Qwen2 vocabularies)) into bench/out/models/, runs llama.cpp
#    (bench/out/refdump) and `hybrid run` greedily on two prompts, and applies
#    the match rule of ../shared/models/README.md (bench/crosscheck/main.go).
# 2. Quantizes the F32 synthetic file (F16 for the larger presets) with
#    llama.cpp's llama-quantize to each quantized type and compares llama.cpp's per-tensor types (and tensor
#    bytes) with the file synth wrote directly (bench/crosscheck/types).
#
# --preset NAME (repeatable) runs only the greedy comparisons of those
# presets, in the types --big gives them (every type for stories15m), and no
# per-tensor type check.
#
# Prints a summary table and writes it to bench/out/crosscheck.txt; exits 1 if
# anything failed. A manual tool: no test or CI runs it (bench/out is
# git-ignored). Needs the llama.cpp that ../shared/tools/llamacpp-setup.sh
# builds (HYBRID_LLAMACPP, default ~/.cache/hybrid-llamacpp).
set -uo pipefail

big=0
only=()
while [ $# -gt 0 ]; do
  case $1 in
    --big) big=1 ;;
    --preset)
      [ $# -ge 2 ] || { echo "usage: $0 [--big] [--preset NAME]..." >&2; exit 2; }
      only+=("$2"); shift ;;
    *) echo "usage: $0 [--big] [--preset NAME]..." >&2; exit 2 ;;
  esac
  shift
done

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
out=bench/out
models=$out/models
runs=$out/crosscheck
bin=${HYBRID_LLAMACPP:-$HOME/.cache/hybrid-llamacpp}/llama.cpp/build/bin
mkdir -p "$models" "$runs"

types=(F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K Q4_K_M Q5_K_M Q2_K Q3_K IQ4_NL IQ4_XS)
bigtypes=(Q4_0 Q4_K_M Q8_0 F16)
llama3types=(Q8_0 Q4_K_M F16)
# The presets of the models people run (Qwen2.5, Qwen3, SmolLM2): the
# common types and the community files' low-bit ones.
newtypes=(F16 Q8_0 Q4_K_M Q2_K Q3_K IQ4_NL IQ4_XS)
newpresets=(smollm2-135m qwen2.5-0.5b qwen3-0.6b)
prompts=("Once upon a time" "Lily and Tom went to the park. They")

die() { echo "crosscheck: $*" >&2; exit 2; }

[ -x "$bin/llama-quantize" ] || die "no llama-quantize in $bin (run ../shared/tools/llamacpp-setup.sh)"
if [ ! -x $out/refdump ] || [ bench/refdump/refdump.cpp -nt $out/refdump ]; then
  bash bench/refdump/build.sh >/dev/null || die "bench/refdump/build.sh failed"
fi
go build -o $out/hybrid ./cmd/hybrid || die "cannot build hybrid"
go build -o $out/crosscheck-rule ./bench/crosscheck || die "cannot build bench/crosscheck"
go build -o $out/crosscheck-types ./bench/crosscheck/types || die "cannot build bench/crosscheck/types"

report=$runs/report.txt
: >"$report"
failed=0
row() { printf '%s\n' "$*" | tee -a "$report"; }

# synth PRESET TYPE: writes $models/PRESET-TYPE.gguf (seed 1) unless present
# and newer than the synth sources.
synth() {
  local f=$models/$1-$2.gguf
  if [ -f "$f" ] && [ -z "$(find models/synth quant models/gguf models/builtin -name '*.go' -newer "$f" | head -1)" ]; then
    echo "$f"; return 0
  fi
  local vocab=()
  # Presets with a real tokenizer take it from llama.cpp's vocabulary files.
  case $1 in
    llama-3.2-1b) vocab=(--vocab "$root/../shared/models/vocab/ggml-vocab-llama-bpe.gguf") ;;
    qwen2.5-0.5b | qwen3-0.6b) vocab=(--vocab "$root/../shared/models/vocab/ggml-vocab-qwen2.gguf") ;;
    smollm2-135m) vocab=(--vocab "$root/../shared/models/vocab/ggml-vocab-gpt-2.gguf") ;;
  esac
  $out/hybrid synth --preset "$1" --type "$2" --seed 1 "${vocab[@]}" -o "$f" >/dev/null 2>"$runs/$1-$2.synth.err" || return 1
  echo "$f"
}

# run PRESET TYPE: the greedy comparison on both prompts.
run() {
  local preset=$1 typ=$2 f i p base line
  if ! f=$(synth "$preset" "$typ"); then
    row "$(printf '%-14s %-7s %-18s FAIL synth failed: %s' "$preset" "$typ" - "$(tail -1 "$runs/$preset-$typ.synth.err")")"
    failed=1; return
  fi
  i=0
  for p in "${prompts[@]}"; do
    i=$((i + 1))
    base=$runs/$preset-$typ.p$i
    if ! $out/refdump "$f" "$p" 32 1 1024 >"$base.ref.json" 2>"$base.ref.err"; then
      row "$(printf '%-14s %-7s p%d FAIL llama.cpp refused the file: %s' "$preset" "$typ" $i "$(grep -v '^$' "$base.ref.err" | tail -1)")"
      failed=1; continue
    fi
    if ! $out/hybrid run --model "$f" --prompt "$p" --temp 0 -n 32 --json --logits --threads 1 \
      >"$base.ours.json" 2>"$base.ours.err"; then
      row "$(printf '%-14s %-7s p%d FAIL hybrid run failed: %s' "$preset" "$typ" $i "$(tail -1 "$base.ours.err")")"
      failed=1; continue
    fi
    line=$($out/crosscheck-rule "$base.ref.json" "$base.ours.json" "$typ") || failed=1
    row "$(printf '%-14s %s' "$preset" "$line")"
  done
}

# quantcheck PRESET SRC TYPE LQTYPE [OPTIONS...]: llama-quantize SRC to LQTYPE
# with OPTIONS and compare its general.file_type, per-tensor types and tensor
# bytes with synth's own PRESET-TYPE file.
quantcheck() {
  local preset=$1 src=$2 typ=$3 lqtype=$4; shift 4
  local ours lq=$models/$preset-$typ.llama-quantize.gguf a b n types bytes diffs verdict=pass
  ours=$(synth "$preset" "$typ") || { row "$(printf '%-14s %-7s FAIL synth failed' "$preset" "$typ")"; failed=1; return; }
  if ! "$bin/llama-quantize" "$@" "$src" "$lq" "$lqtype" 2 >"$runs/$preset-$typ.quantize.log" 2>&1; then
    row "$(printf '%-14s %-7s %-20s FAIL llama-quantize failed (see %s)' "$preset" "$typ" "$* $lqtype" "$runs/$preset-$typ.quantize.log")"
    failed=1; return
  fi
  a=$runs/$preset-$typ.ours.types
  b=$runs/$preset-$typ.llama-quantize.types
  if ! $out/crosscheck-types -hash "$ours" >"$a" || ! $out/crosscheck-types -hash "$lq" >"$b"; then
    row "$(printf '%-14s %-7s FAIL cannot read the files' "$preset" "$typ")"; failed=1; return
  fi
  # Line 1 is general.file_type; then name, type and digest. llama-quantize
  # writes the tensors in its own order, so they are matched by name.
  read -r n types bytes diffs < <(awk -F'\t' '
    NR == FNR { t[$1] = $2; h[$1] = $3; if (FNR > 1) na++; next }
    FNR == 1 { if (t[$1] != $2) { d = "file_type: ours " t[$1] ", llama.cpp " $2; sep = "; " }; next }
    { nb++; seen[$1] = 1
      if (!($1 in t)) { d = d sep $1 ": only in llama.cpp'"'"'s"; sep = "; "; next }
      if (t[$1] == $2) { ty++; if (h[$1] == $3) by++ }
      else { d = d sep $1 ": ours " t[$1] ", llama.cpp " $2; sep = "; " } }
    END {
      for (k in t) if (k != "general.file_type" && !(k in seen)) { d = d sep k ": only in ours"; sep = "; " }
      printf "%d %d %d %s\n", nb, ty, by, d
    }' "$a" "$b")
  [ -z "$diffs" ] || { verdict=FAIL; failed=1; }
  # At most three differences on the line; the .types files hold them all.
  diffs=$(printf '%s' "$diffs" | awk -F'; ' '{ for (i = 1; i <= NF && i <= 3; i++) printf "%s%s", (i > 1 ? "; " : ""), $i; if (NF > 3) printf "; and %d more", NF - 3 }')
  row "$(printf '%-14s %-7s %-20s %-4s %7s %7s %s' "$preset" "$typ" "${*:+$* }$lqtype" "$verdict" "$types/$n" "$bytes/$n" "$diffs")"
  rm -f "$lq"
}

# llama-quantize's type and options that give synth's recipe TYPE: llama.cpp's
# "Q4_K"/"Q5_K" are aliases of Q4_K_M/Q5_K_M, so synth's pure K types are
# Q4_K_S/Q5_K_S with --pure.
qargs() {
  case $1 in
    Q4_K) echo "Q4_K_S --pure" ;;
    Q5_K) echo "Q5_K_S --pure" ;;
    Q2_K) echo "Q2_K --pure" ;;
    Q3_K) echo "Q3_K_S --pure" ;;
    IQ4_NL | IQ4_XS) echo "$1 --pure" ;;
    *) echo "$1" ;;
  esac
}

# typesof PRESET: the types the greedy runs cover for PRESET.
typesof() {
  case $1 in
    stories15m) echo "${types[@]}" ;;
    tinyllama-1.1b) echo "${bigtypes[@]}" ;;
    llama-3.2-1b) echo "${llama3types[@]}" ;;
    smollm2-135m | qwen2.5-0.5b | qwen3-0.6b) echo "${newtypes[@]}" ;;
    *) return 1 ;;
  esac
}

row "== greedy runs: hybrid vs llama.cpp (refdump), 32 tokens, 1 thread"
row "$(printf '%-14s %-7s %-19s %-4s %-9s %5s %-9s %s' preset type prompt ok steps same logit-err note)"
if [ ${#only[@]} -gt 0 ]; then
  for p in "${only[@]}"; do
    ts=$(typesof "$p") || die "no greedy runs for preset $p (have stories15m, tinyllama-1.1b, llama-3.2-1b, ${newpresets[*]})"
    for t in $ts; do run "$p" "$t"; done
  done
  cp "$report" $out/crosscheck.txt
  echo "wrote $out/crosscheck.txt" >&2
  exit $failed
fi
for t in "${types[@]}"; do run stories15m "$t"; done
if [ $big = 1 ]; then
  for t in "${bigtypes[@]}"; do run tinyllama-1.1b "$t"; done
  for t in "${llama3types[@]}"; do run llama-3.2-1b "$t"; done
  for p in "${newpresets[@]}"; do
    for t in "${newtypes[@]}"; do run "$p" "$t"; done
  done
fi

row ""
row "== per-tensor types: synth vs llama-quantize of synth's F32 (F16 for tinyllama) file"
row "$(printf '%-14s %-7s %-20s %-4s %7s %7s %s' preset type llama-quantize ok types bytes differences)"
if src=$(synth stories15m F32); then
  for t in "${types[@]}"; do
    [ "$t" = F32 ] && continue
    # shellcheck disable=SC2046 # qargs is a word list on purpose
    quantcheck stories15m "$src" "$t" $(qargs "$t")
  done
else
  row "stories15m F32: synth failed"; failed=1
fi
if [ $big = 1 ]; then
  if src=$(synth tinyllama-1.1b F16); then
    for t in Q4_K_M Q5_K_M; do quantcheck tinyllama-1.1b "$src" "$t" "$t"; done
  else
    row "tinyllama-1.1b F16: synth failed"; failed=1
  fi
  # Tied embeddings: token_embd takes the output's rule.
  if src=$(synth llama-3.2-1b F16); then
    quantcheck llama-3.2-1b "$src" Q4_K_M Q4_K_M
  else
    row "llama-3.2-1b F16: synth failed"; failed=1
  fi
  for p in "${newpresets[@]}"; do
    if src=$(synth "$p" F16); then
      for t in Q8_0 Q4_K_M Q2_K Q3_K IQ4_NL IQ4_XS; do
        # shellcheck disable=SC2046 # qargs is a word list on purpose
        quantcheck "$p" "$src" "$t" $(qargs "$t")
      done
    else
      row "$p F16: synth failed"; failed=1
    fi
  done
fi

cp "$report" $out/crosscheck.txt
echo "wrote $out/crosscheck.txt" >&2
exit $failed
