#!/usr/bin/env bash
# bench-memo.sh: what the substitute memo earns end to end. Requests/s of
# Caddy with substitute and 200 rules that match nothing on the page, memo
# off (every response scanned) and memo on (the default: after the first
# response the memo knows that nothing matched the body with the origin's
# strong ETag, and streams the next ones unscanned), side by side in one
# run, in front of the same origin (nginx serving a ~1 MB HTML page, with a
# strong ETag as nginx sends for static files); plus plain reverse_proxy for
# scale.
#
#   integration/bench-memo.sh [seconds-per-run] [connections] [rounds]
#   CADDY_BIN=/path/to/caddy integration/bench-memo.sh   # skip the build
#
# The rules are substitute/testdata/rules200.txt, the file
# BenchmarkHandlerManyRules (substitute/bench_test.go) reads for its
# html-none case. wrk sends a browser's Accept-Encoding (gzip, deflate, br,
# zstd) to every server; the origin compresses nothing, so every body is
# the page as is.
#
# Needs wrk and nginx. Builds ./cmd/caddy into a temporary directory; every
# server listens on 127.0.0.1 and is stopped on exit.
set -euo pipefail

DURATION=${1:-10}
CONNS=${2:-16}
ROUNDS=${3:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PAGE=$ROOT/substitute/internal/engine/testdata/rustc-book.html
RULES=$ROOT/substitute/testdata/rules200.txt
ACCEPT_ENCODING='gzip, deflate, br, zstd'
# shellcheck source=integration/bench-lib.sh
. "$ROOT/integration/bench-lib.sh"
bench_start bench-memo wrk nginx curl go python3
for f in "$PAGE" "$RULES"; do
	[ -f "$f" ] || { echo "missing $f" >&2; exit 1; }
done
ORIGIN=$(free_port); PLAIN=$(free_port); OFF=$(free_port); ON=$(free_port); ADMIN=$(free_port)

caddy_binary "$ROOT" "$WORK/caddy"
mkdir -p "$WORK/www" "$WORK/origin"
cp "$PAGE" "$WORK/www/page.html"

# The rules file: kind<TAB>find<TAB>replacement, # comments. In the
# Caddyfile each token goes between backticks (taken as written: no escapes;
# the file has no backtick).
caddy_rules=""; n_rules=0
while IFS= read -r line; do
	case $line in '' | '#'*) continue ;; esac
	IFS=$'\t' read -r kind find repl <<<"$line"
	case $kind in replace | regex) ;; *) echo "$RULES: bad line: $line" >&2; exit 1 ;; esac
	case $find$repl in *'`'*) echo "$RULES: backtick in: $line" >&2; exit 1 ;; esac
	caddy_rules+="		$kind \`$find\` \`$repl\`"$'\n'
	n_rules=$((n_rules + 1))
done <"$RULES"
[ "$n_rules" = 200 ] || { echo "$RULES: $n_rules rules, want 200" >&2; exit 1; }

cat >"$WORK/origin/nginx.conf" <<NGX
worker_processes 2;
pid $WORK/origin/nginx.pid;
error_log $WORK/origin/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	include /etc/nginx/mime.types;
	client_body_temp_path $WORK/origin; proxy_temp_path $WORK/origin; fastcgi_temp_path $WORK/origin;
	uwsgi_temp_path $WORK/origin; scgi_temp_path $WORK/origin;
	server {
		listen 127.0.0.1:$ORIGIN;
		root $WORK/www; sendfile on; open_file_cache max=16;
	}
}
NGX
nginx -p "$WORK/origin" -c "$WORK/origin/nginx.conf" -g 'daemon off;' &
PIDS+=($!)

subst_server() { # port memo-line
	printf 'http://127.0.0.1:%s {\n\tsubstitute {\n%s%s\t}\n\treverse_proxy 127.0.0.1:%s\n}\n' "$1" "$caddy_rules" "$2" "$ORIGIN"
}
{
	caddy_global "127.0.0.1:$ADMIN" "$WORK/caddy-data"
	printf 'http://127.0.0.1:%s {\n\treverse_proxy 127.0.0.1:%s\n}\n' "$PLAIN" "$ORIGIN"
	subst_server "$OFF" $'\t\tmemo off\n'
	subst_server "$ON" "" # the default: memo on
} >"$WORK/Caddyfile"
HOME=$WORK "$WORK/caddy" run --config "$WORK/Caddyfile" --adapter caddyfile >"$WORK/caddy.log" 2>&1 &
CADDY_PID=$!
PIDS+=($CADDY_PID)

wait_ready /page.html $ORIGIN $PLAIN $OFF $ON

# For the record: no rule matches, so every server returns the page as is;
# the origin's ETag is strong.
etag=$(curl -sI "http://127.0.0.1:$ORIGIN/page.html" | tr -d '\r' | awk -F': ' 'tolower($1) == "etag" {print $2}')
echo "origin page: $(wc -c <"$WORK/www/page.html") bytes, ETag $etag; $n_rules rules from ${RULES#"$ROOT"/}" >&2
case $etag in '"'*) ;; *) echo "origin ETag $etag is not strong: the memo would never be used" >&2; exit 1 ;; esac
for name in plain:$PLAIN off:$OFF on:$ON; do
	port=${name#*:}
	curl -s -H "Accept-Encoding: $ACCEPT_ENCODING" -D "$WORK/hdr.${name%:*}" "http://127.0.0.1:$port/page.html" -o "$WORK/out.${name%:*}"
	cmp -s "$WORK/out.${name%:*}" "$WORK/www/page.html" || { echo "${name%:*}: body differs from the page" >&2; exit 1; }
	printf '%-6s body %8d bytes, Content-Encoding: %s\n' "${name%:*}" "$(wc -c <"$WORK/out.${name%:*}")" \
		"$(tr -d '\r' <"$WORK/hdr.${name%:*}" | awk -F': ' 'tolower($1) == "content-encoding" {print $2}' | grep . || echo none)" >&2
done

metric() { # name: a counter of Caddy's /metrics (0 when absent)
	curl -s "http://127.0.0.1:$ADMIN/metrics" | awk -v n="$1" '$1 == n {v = $2} END {printf "%d", v}'
}

# Rounds: each server in turn, the order reversed every other round, so
# that the machine's drift (it is shared and noisy) falls on every server
# alike; the table gives the median of the rounds, and each ratio is the
# median of its per-round ratios. Caddy's CPU per request (user+system,
# from /proc) shows where its time goes.
ticks=$(getconf CLK_TCK)
servers() { # round
	if [ $(($1 % 2)) = 1 ]; then echo "plain:$PLAIN off:$OFF on:$ON"; else echo "on:$ON off:$OFF plain:$PLAIN"; fi
}
measure() { # name port: appends "name req/s caddy-ms/request" to $WORK/runs
	local c0 c1 out n
	c0=$(cpu_ticks "$CADDY_PID")
	out=$(wrk -t2 -c"$CONNS" -d"${DURATION}s" -H "Accept-Encoding: $ACCEPT_ENCODING" "http://127.0.0.1:$2/page.html")
	c1=$(cpu_ticks "$CADDY_PID")
	n=$(awk '/requests in/ {print $1}' <<<"$out")
	[ "${n:-0}" -gt 0 ] || { echo "no request completed on $1" >&2; exit 1; }
	grep -q 'Non-2xx' <<<"$out" && { echo "$1: non-2xx responses" >&2; exit 1; }
	echo "$1 $(awk '/Requests\/sec/ {print $2}' <<<"$out") $(awk -v a="$c0" -v b="$c1" -v n="$n" -v t="$ticks" 'BEGIN{printf "%.2f", (b-a)*1000/t/n}')" >>"$WORK/runs"
}
for s in $(servers 1); do # warm up
	IFS=: read -r _ port <<<"$s"
	wrk -t2 -c"$CONNS" -d2s -H "Accept-Encoding: $ACCEPT_ENCODING" "http://127.0.0.1:$port/page.html" >/dev/null
done
hits0=$(metric caddy_substitute_memo_hits_total); misses0=$(metric caddy_substitute_memo_misses_total)
echo "wrk -t2 -c$CONNS -d${DURATION}s -H 'Accept-Encoding: $ACCEPT_ENCODING', $ROUNDS rounds of one server at a time..." >&2
for r in $(seq "$ROUNDS"); do
	for s in $(servers "$r"); do
		IFS=: read -r name port <<<"$s"
		measure "$name" "$port"
	done
	echo "round $r: $(awk -v r="$r" 'NR > (r-1)*3 {printf "%s %s  ", $1, $2}' "$WORK/runs")" >&2
done
hits=$(($(metric caddy_substitute_memo_hits_total) - hits0))
misses=$(($(metric caddy_substitute_memo_misses_total) - misses0))

col() { awk -v n="$1" -v c="$2" '$1 == n {print $c}' "$WORK/runs" | median | awk -v f="$3" '{printf f, $1}'; }
ratio() { # a b: median over rounds of a's req/s over b's
	paste <(awk -v n="$1" '$1 == n {print $2}' "$WORK/runs") <(awk -v n="$2" '$1 == n {print $2}' "$WORK/runs") |
		awk '{printf "%.4f\n", $1/$2}' | median | awk '{printf "%.2f", $1}'
}
row() { # label name
	printf '%-50s %12s %10s %14s\n' "$1" "$(col "$2" 2 %.1f)" "$(ratio "$2" plain)" "$(col "$2" 3 %.2f)"
}
printf '\n%-50s %12s %10s %14s\n' "server (same origin, page; 200 rules, none match)" "requests/s" "/ plain" "caddy cpu ms/r"
row "caddy reverse_proxy" plain
row "caddy + substitute, memo off (scanned)" off
row "caddy + substitute, memo on (unscanned)" on
printf '\nmedians of %s rounds of %ss, %s connections\n' "$ROUNDS" "$DURATION" "$CONNS"
printf 'memo on / memo off: %s (per-round ratios: %s)\n' "$(ratio on off)" \
	"$(paste <(awk '$1 == "on" {print $2}' "$WORK/runs") <(awk '$1 == "off" {print $2}' "$WORK/runs") | awk '{printf "%.2f ", $1/$2}')"
printf 'memo during the rounds: %d hits (streamed unscanned), %d misses\n' "$hits" "$misses"
