#!/bin/bash
# bench/server.sh: hybrid serve against llama-server under concurrent streams.
#
# For 1, 4 and 16 concurrent streams it starts `hybrid serve --parallel N`
# and llama-server `-np N`, one at a time, on the same synthetic
# TinyLlama-1.1B Q4_0 (written by `hybrid synth` into bench/out/models/ if
# missing), with the same KV cache of SLOT_CTX cells a slot (--ctx / -c
# SLOT_CTX×N: each slot gets ctx/N on both) and THREADS threads, llama-server
# otherwise at its defaults (continuous batching on). Against each,
# bench/serverload sends a warm-up request (the same text in every run), then
# has N clients send streamed /v1/completions requests (greedy, about
# PROMPT_TOKENS prompt tokens, MAX_TOKENS generated), each client one after
# another, max(REQUESTS_PER_STREAM×N, 8) in all, and measures the aggregate
# generated tokens/s, the time to first token, and whether the greedy texts
# agree (between the servers, and with each one's own at 1 stream). REPS
# repetitions of the whole, alternating which server goes first. Prints a
# Markdown table (the one in bench/RESULTS.md: each rate the median of the
# repetitions, with their range) and keeps the raw JSON and the servers' logs
# in bench/out/server/. About 14 minutes on 2 cores.
#
# Needs llama.cpp's source from ../shared/tools/llamacpp-setup.sh
# (HYBRID_LLAMACPP, default ~/.cache/hybrid-llamacpp): llama-server is built
# from it once into HYBRID_LLAMACPP/build-server (the setup script's build has
# no server), with the setup script's flags. Not run by tests or CI.
#
#   bash bench/server.sh
#   STREAMS="1 4" MAX_TOKENS=32 REPS=1 bash bench/server.sh
#
# Settings (environment): STREAMS ("1 4 16"), PRESET (tinyllama-1.1b), TYPE
# (Q4_0), MODEL (bench/out/models/PRESET-TYPE.gguf), THREADS (2),
# PROMPT_TOKENS (64), MAX_TOKENS (64), SLOT_CTX (256), REQUESTS_PER_STREAM
# (2), REPS (3), PORT (a free one), OUT (bench/out/server); TRIES (3) and
# OTHER_MAX (0.1): a run during which other processes used more than
# OTHER_MAX cores is run again, up to TRIES times (the table notes it if the
# last try was disturbed too); PAUSE (20): seconds idle between each run's
# warm-up and its measured requests. The 2-core CI kind slows down under
# sustained load (decode alone: about 57 tok/s for 10-20 s after a pause,
# then anywhere from 8 to 50), so every run starts from the same rest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

LLDIR=${HYBRID_LLAMACPP:-$HOME/.cache/hybrid-llamacpp}
STREAMS=${STREAMS:-1 4 16}
PRESET=${PRESET:-tinyllama-1.1b}
TYPE=${TYPE:-Q4_0}
MODEL=${MODEL:-bench/out/models/$PRESET-$TYPE.gguf}
THREADS=${THREADS:-2}
PROMPT_TOKENS=${PROMPT_TOKENS:-64}
MAX_TOKENS=${MAX_TOKENS:-64}
SLOT_CTX=${SLOT_CTX:-256}
REQUESTS_PER_STREAM=${REQUESTS_PER_STREAM:-2}
REPS=${REPS:-3}
TRIES=${TRIES:-3}
PAUSE=${PAUSE:-20}
OTHER_MAX=${OTHER_MAX:-0.1}
out=${OUT:-bench/out/server}

die() { echo "bench/server.sh: $*" >&2; exit 1; }
(( SLOT_CTX >= PROMPT_TOKENS + MAX_TOKENS + 16 )) ||
  die "SLOT_CTX=$SLOT_CTX leaves no room for PROMPT_TOKENS=$PROMPT_TOKENS + MAX_TOKENS=$MAX_TOKENS (and 16 to spare) in a slot"
command -v curl >/dev/null || die "needs curl"

# llama-server, from the setup script's source, once.
SB=$LLDIR/build-server
LS=$SB/bin/llama-server
if [[ ! -x $LS ]]; then
  [[ -d $LLDIR/llama.cpp ]] || die "no llama.cpp source in $LLDIR: run ../shared/tools/llamacpp-setup.sh"
  echo "bench/server.sh: building llama-server into $SB (once; ~15 min on 2 cores)" >&2
  mkdir -p "$SB"
  # The setup script's flags, the server on; no web UI (it would be
  # downloaded or built with npm) and no HTTPS.
  cmake -S "$LLDIR/llama.cpp" -B "$SB" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF > "$SB/configure.log" 2>&1 || { tail -30 "$SB/configure.log" >&2; die "cmake configure failed ($SB/configure.log)"; }
  cmake --build "$SB" -j"$(nproc)" --target llama-server > "$SB/build.log" 2>&1 ||
    { tail -30 "$SB/build.log" >&2; die "building llama-server failed ($SB/build.log)"; }
fi

mkdir -p "$out" "$(dirname "$MODEL")"
rm -f "$out"/hybrid.s*.* "$out"/llama.s*.* "$out"/compare.md "$out"/table.md
go build -o "$out/hybrid" ./cmd/hybrid
go build -o "$out/serverload" ./bench/serverload
[[ -f $MODEL ]] || "$out/hybrid" synth --preset "$PRESET" --type "$TYPE" -o "$MODEL"

# A free loopback port: nothing answers on it now.
port=${PORT:-}
if [[ -z $port ]]; then
  for _ in $(seq 50); do
    port=$((20000 + RANDOM % 20000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
  done
fi
url=http://127.0.0.1:$port

pid=
stop_server() {
  if [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    # hybrid serve lets running requests finish for its --grace (none run
    # here); then make sure.
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=
  fi
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# start_server LOG CMD...: starts the server and waits for its /health;
# fails (the server stopped) if there is none in 120 s.
start_server() {
  local log=$1; shift
  echo "\$ $*" > "$log"
  "$@" >> "$log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      pid=
      tail -20 "$log" >&2
      echo "bench/server.sh: the server exited before it was healthy: $*" >&2
      return 1
    fi
    # Our own server's answer, not that of another process that took the
    # port: the process must still be alive after it.
    if curl -sf -o /dev/null "$url/health" && kill -0 "$pid" 2>/dev/null; then
      return 0
    fi
    sleep 0.2
  done
  stop_server
  tail -20 "$log" >&2
  echo "bench/server.sh: no healthy server on $url after 120 s: $*" >&2
  return 1
}

cpt=
failed=0
for rep in $(seq "$REPS"); do
  # Each repetition alternates which server goes first, against the drift
  # of this kind of machine's speed.
  sides="hybrid llama"; (( rep % 2 )) || sides="llama hybrid"
  for n in $STREAMS; do
    ctx=$((SLOT_CTX * n))
    requests=$((REQUESTS_PER_STREAM * n)); (( requests >= 8 )) || requests=8
    for side in $sides; do
      run=$out/$side.s$n.r$rep
      # A run beside another busy process (this machine's other users) is
      # run again, up to TRIES times in all.
      for try in $(seq "$TRIES"); do
        cat "$MODEL" > /dev/null   # both start with the file in the page cache
        # --ctx-override: 16 slots of 256 cells are more than TinyLlama's
        # 2048 positions in all (a slot's positions stay under 256), as
        # llama-server's -c allows.
        cmd=("$out/hybrid" serve --model "$MODEL" --parallel "$n" --ctx "$ctx" --ctx-override --threads "$THREADS" --addr "127.0.0.1:$port")
        [[ $side == hybrid ]] || cmd=("$LS" -m "$MODEL" -np "$n" -c "$ctx" -t "$THREADS" --host 127.0.0.1 --port "$port")
        if ! start_server "$run.log" "${cmd[@]}"; then
          failed=1
          rm -f "$run.json"
          break
        fi
        echo "bench/server.sh: run $rep of $REPS: $side, $n stream(s), $requests requests" >&2
        # The first run's measured characters a token sizes every later
        # run's prompts, so that both servers get the same text.
        ok=1
        "$out/serverload" --url "$url/v1" --streams "$n" --requests "$requests" --max-tokens "$MAX_TOKENS" \
          --prompt-tokens "$PROMPT_TOKENS" ${cpt:+--chars-per-token "$cpt"} --server-pid "$pid" --pause "${PAUSE}s" --json > "$run.json" 2> "$run.err" || ok=0
        stop_server
        if (( !ok )); then
          failed=1
          echo "bench/server.sh: $side with $n stream(s) failed: $(cat "$run.err")" >&2
          [[ -s $run.json ]] || rm -f "$run.json"
          break
        fi
        other=$(sed -n 's/^ *"other_cores": *\([0-9.e+-]*\),*$/\1/p' "$run.json")
        awk -v o="${other:-0}" -v m="$OTHER_MAX" 'BEGIN { exit !(o > m) }' || break
        echo "bench/server.sh: other processes used $(printf %.2f "$other") cores during that run (try $try of $TRIES)" >&2
      done
      if [[ -z $cpt && -s $run.json ]]; then
        # Exactly as written: Go's JSON floats parse back to the same value.
        cpt=$(sed -n 's/^ *"chars_per_token": *\([0-9.e+-]*\),*$/\1/p' "$run.json")
      fi
    done
  done
done

"$out/serverload" --compare "$out" > "$out/compare.md" || failed=1
{
  echo "$(date -u '+%F %H:%M') UTC · $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores · llama.cpp $("$LS" --version 2>&1 | grep -m1 -o 'version: .*' || true)"
  echo
  echo "$(basename "$MODEL"), $THREADS threads, $SLOT_CTX KV cells a slot, about $PROMPT_TOKENS prompt tokens ($(printf %.2f "${cpt:-0}") characters a token), $REQUESTS_PER_STREAM requests a stream (8 at least), $MAX_TOKENS max tokens, greedy; $REPS runs of each"
  echo
  cat "$out/compare.md"
} | tee "$out/table.md"
(( failed == 0 )) || die "some runs failed: see $out/*.err and $out/*.log"
