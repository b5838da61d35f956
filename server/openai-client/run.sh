#!/usr/bin/env bash
# Tests `hybrid serve` (four slots: batched decode) with the official openai npm client: builds hybrid,
# serves the built-in model on a free loopback port, installs the client
# from package-lock.json (npm ci) and runs client.test.mjs with node --test,
# then stops the server with SIGTERM and checks that it shut down cleanly.
# Any failure exits non-zero with the server's log. Needs go, node and npm.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d)"
pid=""

cleanup() {
	if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "openai-client: FAIL: $*" >&2
	if [[ -s "$tmp/serve.err" ]]; then
		echo "--- hybrid serve's log:" >&2
		tail -n 50 "$tmp/serve.err" >&2
	fi
	exit 1
}

echo "openai-client: building hybrid"
(cd "$root" && go build -o "$tmp/hybrid" ./cmd/hybrid) || fail "go build"

"$tmp/hybrid" serve --addr 127.0.0.1:0 --parallel 4 --ctx 2048 --ctx-override >"$tmp/serve.out" 2>"$tmp/serve.err" &
pid=$!

url=""
for _ in $(seq 1 300); do
	url="$(grep -o 'http://[^ ]*' "$tmp/serve.out" 2>/dev/null | head -n 1 || true)"
	[[ -n "$url" ]] && break
	kill -0 "$pid" 2>/dev/null || fail "hybrid serve exited before listening"
	sleep 0.1
done
[[ -n "$url" ]] || fail "hybrid serve did not say where it listens in 30 s"
echo "openai-client: hybrid serve at $url"

# Node 20 has fetch; no curl needed.
HEALTH_URL="$url/health" node -e '
	const deadline = Date.now() + 30000;
	(async () => {
		for (;;) {
			try {
				const r = await fetch(process.env.HEALTH_URL);
				const body = await r.json();
				if (r.ok && body.status === "ok") return;
			} catch {}
			if (Date.now() > deadline) { console.error("no healthy /health in 30 s"); process.exit(1); }
			await new Promise((res) => setTimeout(res, 100));
		}
	})();
' || fail "/health"

echo "openai-client: npm ci"
(cd "$here" && npm ci --no-audit --no-fund) || fail "npm ci"

echo "openai-client: node --test"
(cd "$here" && HYBRID_BASE_URL="$url/v1" node --test client.test.mjs) || fail "the openai client tests"

kill -TERM "$pid"
code=0
wait "$pid" || code=$?
pid=""
[[ "$code" -eq 0 ]] || fail "hybrid serve exited with $code after SIGTERM"
grep -q "hybrid serve: stopped" "$tmp/serve.err" || fail "hybrid serve did not say it stopped"
echo "openai-client: PASS"
