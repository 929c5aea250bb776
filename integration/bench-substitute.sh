#!/usr/bin/env bash
# bench-substitute.sh: requests/s of Caddy reverse_proxy, Caddy with
# substitute, and nginx with subs_filter, side by side in one run, all in
# front of the same origin (nginx serving a ~1 MB HTML page) with the same
# 10 rules (6 literal, 4 regex); plus Caddy scanning the page for one rule
# that never matches (the cost of the scan alone).
#
#   integration/bench-substitute.sh [seconds-per-run] [connections]
#   CADDY_BIN=/path/to/caddy integration/bench-substitute.sh   # skip the build
#
# Needs wrk, nginx-light and libnginx-mod-http-subs-filter. Builds
# ./cmd/caddy into a temporary directory; every server listens on
# 127.0.0.1 and is stopped on exit.
set -euo pipefail

DURATION=${1:-10}
CONNS=${2:-16}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PAGE=$ROOT/substitute/engine/testdata/rustc-book.html
SUBS_MODULE=/usr/lib/nginx/modules/ngx_http_subs_filter_module.so
WORK=$(mktemp -d /tmp/bench-substitute.XXXXXX)
PIDS=()
cleanup() {
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

for cmd in wrk nginx curl go; do
	command -v $cmd >/dev/null || { echo "missing $cmd" >&2; exit 1; }
done
[ -f "$PAGE" ] || { echo "missing $PAGE" >&2; exit 1; }
[ -f "$SUBS_MODULE" ] || { echo "missing $SUBS_MODULE (libnginx-mod-http-subs-filter)" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ORIGIN=$(free_port); PLAIN=$(free_port); SUBST=$(free_port); NGINX=$(free_port); ADMIN=$(free_port)
SCAN=$(free_port)

chmod 755 "$WORK" # nginx workers may run as another user
if [ -n "${CADDY_BIN:-}" ]; then
	cp "$CADDY_BIN" "$WORK/caddy"
else
	echo "building caddy (set CADDY_BIN to skip)..." >&2
	(cd "$ROOT" && go build -o "$WORK/caddy" ./cmd/caddy)
fi
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

cat >"$WORK/Caddyfile" <<CADDY
{
	admin 127.0.0.1:$ADMIN
	persist_config off
	auto_https off
	storage file_system $WORK/caddy-data
}
http://127.0.0.1:$PLAIN {
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
http://127.0.0.1:$SUBST {
	substitute {
$caddy_rules	}
	reverse_proxy 127.0.0.1:$ORIGIN
}
CADDY
HOME=$WORK "$WORK/caddy" run --config "$WORK/Caddyfile" --adapter caddyfile >"$WORK/caddy.log" 2>&1 &
PIDS+=($!)

for port in $ORIGIN $NGINX $PLAIN $SCAN $SUBST; do
	for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/page.html" && break; sleep 0.1; done
done

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

rps() { # port
	wrk -t2 -c"$CONNS" -d2s "http://127.0.0.1:$1/page.html" >/dev/null # warm up
	wrk -t2 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$1/page.html" | awk '/Requests\/sec/ {print $2}'
}
echo "wrk -t2 -c$CONNS -d${DURATION}s, one server at a time..." >&2
plain=$(rps "$PLAIN")
scan=$(rps "$SCAN")
subst=$(rps "$SUBST")
subs=$(rps "$NGINX")

printf '\n%-34s %12s %10s\n' "server (same origin, page, rules)" "requests/s" "ratio"
printf '%-34s %12s %10s\n' "caddy reverse_proxy" "$plain" "1.00"
printf '%-34s %12s %10s\n' "caddy + substitute, scan only" "$scan" "$(awk -v a="$scan" -v b="$plain" 'BEGIN{printf "%.2f", a/b}')"
printf '%-34s %12s %10s\n' "caddy reverse_proxy + substitute" "$subst" "$(awk -v a="$subst" -v b="$plain" 'BEGIN{printf "%.2f", a/b}')"
printf '%-34s %12s %10s\n' "nginx proxy_pass + subs_filter" "$subs" "$(awk -v a="$subs" -v b="$plain" 'BEGIN{printf "%.2f", a/b}')"
printf '\nsubstitute / plain caddy: %s (target >= 0.60)\n' "$(awk -v a="$subst" -v b="$plain" 'BEGIN{printf "%.2f", a/b}')"
printf 'substitute / subs_filter:  %s (target >= 5)\n' "$(awk -v a="$subst" -v b="$subs" 'BEGIN{printf "%.2f", a/b}')"
