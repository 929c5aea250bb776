#!/usr/bin/env bash
# bench-substitute.sh: requests/s of Caddy reverse_proxy, Caddy with
# substitute, and nginx with subs_filter, side by side in one run, all in
# front of the same origin (nginx serving a ~1 MB HTML page) with the same
# 10 rules (6 literal, 4 regex); plus two rows that show where the time goes:
# the memo streaming the page unscanned (the handler's plumbing alone: decide,
# buffer, chunked output), and Caddy scanning it for one rule that never
# matches, memo off (the cost of reading every byte once more).
#
#   integration/bench-substitute.sh [seconds-per-run] [connections] [rounds]
#   CADDY_BIN=/path/to/caddy integration/bench-substitute.sh   # skip the build
#   CADDY_BIN_B=/path/to/other/caddy integration/bench-substitute.sh
#
# CADDY_BIN_B adds a row: another build (say, main before a change) running
# the same substitute server in its own process, measured in the same rounds
# (it and the first build's substitute server swap places every round), and
# the ratio of the two; single runs on this machine differ by several
# percent, so an engine change is judged this way.
#
# Needs wrk, nginx-light and libnginx-mod-http-subs-filter. Builds
# ./cmd/caddy into a temporary directory; every server listens on
# 127.0.0.1 and is stopped on exit.
set -euo pipefail

DURATION=${1:-10}
CONNS=${2:-16}
ROUNDS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PAGE=$ROOT/substitute/internal/engine/testdata/rustc-book.html
SUBS_MODULE=/usr/lib/nginx/modules/ngx_http_subs_filter_module.so
# shellcheck source=integration/bench-lib.sh
. "$ROOT/integration/bench-lib.sh"
bench_start bench-substitute wrk nginx curl go python3
[ -f "$PAGE" ] || { echo "missing $PAGE" >&2; exit 1; }
[ -f "$SUBS_MODULE" ] || { echo "missing $SUBS_MODULE (libnginx-mod-http-subs-filter)" >&2; exit 1; }
ORIGIN=$(free_port); PLAIN=$(free_port); SUBST=$(free_port); NGINX=$(free_port); ADMIN=$(free_port)
SCAN=$(free_port); MEMO=$(free_port); SUBST_B=$(free_port)

caddy_binary "$ROOT" "$WORK/caddy"
mkdir -p "$WORK/www" "$WORK/origin" "$WORK/subs"
cp "$PAGE" "$WORK/www/page.html"

# The 10 rules, in both syntaxes: kind|find|replacement.
RULES=(
	'replace|https://doc.rust-lang.org|https://docs.example.org'
	'replace|<table>|<table class="t">'
	'replace|https://llvm.org|https://llvm.example.org'
	'replace|rustc|RUSTC'
	'replace|legacyWidget|widget'
	'replace|https://cdn.example.com/|/static/'
	'regex|https?://github\.com/([\w-]+)|https://git.example.com/$1'
	'regex|\bwarning\b|WARN'
	'regex|\bv(\d+)\.(\d+)\.(\d+)\b|v$1.$2.x'
	'regex|campaign-[0-9a-f]{8}|campaign'
)
caddy_rules=""; nginx_rules=""
for r in "${RULES[@]}"; do
	IFS='|' read -r kind find repl <<<"$r"
	caddy_rules+="		$kind \`$find\` \`$repl\`"$'\n'
	flag=""; [ "$kind" = regex ] && flag=" r"
	nginx_rules+="		subs_filter '$find' '$repl'$flag;"$'\n'
done

nginx_conf() { # name port body
	cat >"$WORK/$1/nginx.conf" <<NGX
load_module $SUBS_MODULE;
worker_processes 2;
pid $WORK/$1/nginx.pid;
error_log $WORK/$1/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	include /etc/nginx/mime.types;
	client_body_temp_path $WORK/$1; proxy_temp_path $WORK/$1; fastcgi_temp_path $WORK/$1;
	uwsgi_temp_path $WORK/$1; scgi_temp_path $WORK/$1;
	upstream origin { server 127.0.0.1:$ORIGIN; keepalive 64; }
	server {
		listen 127.0.0.1:$2;
$3
	}
}
NGX
	nginx -p "$WORK/$1" -c "$WORK/$1/nginx.conf" -g 'daemon off;' &
	PIDS+=($!)
}
nginx_conf origin "$ORIGIN" "		root $WORK/www; sendfile on; open_file_cache max=16;"
nginx_conf subs "$NGINX" "		location / {
			proxy_pass http://origin; proxy_http_version 1.1;
			proxy_set_header Connection \"\"; proxy_set_header Accept-Encoding \"\";
$nginx_rules		}"

subst_server() { # port: the 10 rules in front of the origin
	printf 'http://127.0.0.1:%s {\n\tsubstitute {\n%s\t}\n\treverse_proxy 127.0.0.1:%s\n}\n' "$1" "$caddy_rules" "$ORIGIN"
}
{
	caddy_global "127.0.0.1:$ADMIN" "$WORK/caddy-data"
	cat <<CADDY
http://127.0.0.1:$PLAIN {
	reverse_proxy 127.0.0.1:$ORIGIN
}
# The plumbing alone: the same rule with the memo on; after the first
# response the memo knows that nothing matches under the page's ETag.
http://127.0.0.1:$MEMO {
	substitute {
		replace "zq" "y"
	}
	reverse_proxy 127.0.0.1:$ORIGIN
}
# The cost of reading every byte once more: one rule that never matches, with
# the memo off (else the memo would stream the unchanged page unscanned).
http://127.0.0.1:$SCAN {
	substitute {
		replace "zq" "y"
		memo off
	}
	reverse_proxy 127.0.0.1:$ORIGIN
}
CADDY
	subst_server "$SUBST"
} >"$WORK/Caddyfile"
HOME=$WORK "$WORK/caddy" run --config "$WORK/Caddyfile" --adapter caddyfile >"$WORK/caddy.log" 2>&1 &
CADDY_PID=$!
PIDS+=($CADDY_PID)
CADDY_B_PID=
if [ -n "${CADDY_BIN_B:-}" ]; then
	cp "$CADDY_BIN_B" "$WORK/caddy-b"
	{ caddy_global off "$WORK/caddy-b-data"; subst_server "$SUBST_B"; } >"$WORK/Caddyfile-b"
	HOME=$WORK "$WORK/caddy-b" run --config "$WORK/Caddyfile-b" --adapter caddyfile >"$WORK/caddy-b.log" 2>&1 &
	CADDY_B_PID=$!
	PIDS+=($CADDY_B_PID)
fi

wait_ready /page.html $ORIGIN $NGINX $PLAIN $MEMO $SCAN $SUBST ${CADDY_B_PID:+$SUBST_B}

# The outputs, for the record (subs_filter applies rules one after another
# line by line, substitute all at once, so the bytes may differ slightly).
for name in plain:$PLAIN substitute:$SUBST subs_filter:$NGINX; do
	port=${name#*:}
	curl -s "http://127.0.0.1:$port/page.html" -o "$WORK/out.${name%:*}"
done
echo "origin page: $(wc -c <"$WORK/www/page.html") bytes" >&2
for n in plain substitute subs_filter; do
	printf '%-12s body %8d bytes, github.com/ left: %d, RUSTC: %d\n' "$n" "$(wc -c <"$WORK/out.$n")" \
		"$(grep -o 'github\.com/' "$WORK/out.$n" | wc -l)" "$(grep -o RUSTC "$WORK/out.$n" | wc -l)" >&2
done

# Rounds: each server in turn, ROUNDS times, so that the machine's drift
# (it is shared and noisy) falls on every server alike; the table gives the
# median of the rounds, and each ratio is the median of its per-round ratios.
# Caddy's CPU per request (user+system, from /proc) shows where its time goes.
ticks=$(getconf CLK_TCK)
# Servers as name:port:pid, pid being the Caddy process to time (none for
# nginx). The two substitute builds swap places every round.
SUBSTS=("substitute:$SUBST:$CADDY_PID")
[ -n "$CADDY_B_PID" ] && SUBSTS+=("substitute_b:$SUBST_B:$CADDY_B_PID")
servers() { # round
	local s=("${SUBSTS[@]}")
	if [ "${#s[@]}" = 2 ] && [ $(($1 % 2)) = 0 ]; then s=("${s[1]}" "${s[0]}"); fi
	echo "plain:$PLAIN:$CADDY_PID memo:$MEMO:$CADDY_PID scan:$SCAN:$CADDY_PID ${s[*]} subs_filter:$NGINX:"
}
measure() { # name port pid: appends "name req/s caddy-ms/request" to $WORK/runs
	local c0=0 c1=0 out n
	[ -n "$3" ] && c0=$(cpu_ticks "$3")
	out=$(wrk -t2 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$2/page.html")
	[ -n "$3" ] && c1=$(cpu_ticks "$3")
	n=$(awk '/requests in/ {print $1}' <<<"$out")
	[ "${n:-0}" -gt 0 ] || { echo "no request completed on $1" >&2; exit 1; }
	echo "$1 $(awk '/Requests\/sec/ {print $2}' <<<"$out") $(awk -v a="$c0" -v b="$c1" -v n="$n" -v t="$ticks" 'BEGIN{printf "%.2f", (b-a)*1000/t/n}')" >>"$WORK/runs"
}
for s in $(servers 1); do # warm up
	IFS=: read -r _ port _ <<<"$s"
	wrk -t2 -c"$CONNS" -d2s "http://127.0.0.1:$port/page.html" >/dev/null
done
echo "wrk -t2 -c$CONNS -d${DURATION}s, $ROUNDS rounds of one server at a time..." >&2
for r in $(seq "$ROUNDS"); do
	for s in $(servers "$r"); do
		IFS=: read -r name port pid <<<"$s"
		measure "$name" "$port" "$pid"
	done
	echo "round $r: $(awk -v r="$r" -v n="$(wc -w <<<"$(servers 1)")" 'NR > (r-1)*n {printf "%s %s  ", $1, $2}' "$WORK/runs")" >&2
done

col() { awk -v n="$1" -v c="$2" '$1 == n {print $c}' "$WORK/runs" | median | awk -v f="$3" '{printf f, $1}'; }
ratio() { # a b: median over rounds of a's req/s over b's
	paste <(awk -v n="$1" '$1 == n {print $2}' "$WORK/runs") <(awk -v n="$2" '$1 == n {print $2}' "$WORK/runs") |
		awk '{printf "%.4f\n", $1/$2}' | median | awk '{printf "%.2f", $1}'
}
row() { # label name [cpu]: a line of the table
	printf '%-34s %12s %10s %14s\n' "$1" "$(col "$2" 2 %.1f)" "$(ratio "$2" plain)" "${3:-$(col "$2" 3 %.2f)}"
}
printf '\n%-34s %12s %10s %14s\n' "server (same origin, page, rules)" "requests/s" "ratio" "caddy cpu ms/r"
row "caddy reverse_proxy" plain
row "caddy + substitute, memo unscanned" memo
row "caddy + substitute, scan only" scan
row "caddy reverse_proxy + substitute" substitute
[ -n "$CADDY_B_PID" ] && row "CADDY_BIN_B + substitute" substitute_b
row "nginx proxy_pass + subs_filter" subs_filter -
printf '\nmedians of %s rounds of %ss\n' "$ROUNDS" "$DURATION"
printf 'substitute / plain caddy: %s (target >= 0.60)\n' "$(ratio substitute plain)"
printf 'substitute / subs_filter:  %s (target >= 5)\n' "$(ratio substitute subs_filter)"
if [ -n "$CADDY_B_PID" ]; then
	printf 'substitute / CADDY_BIN_B:  %s (per-round medians; CPU %s / %s ms a request)\n' "$(ratio substitute substitute_b)" "$(col substitute 3 %.2f)" "$(col substitute_b 3 %.2f)"
fi
