#!/usr/bin/env bash
# bench-br.sh: Caddy `encode br` against nginx's Brotli filter
# (libnginx-mod-http-brotli-filter, Google's C encoder) serving the same
# minified scripts on loopback, at the same quality and window, with wrk.
#
# Usage: integration/bench-br.sh [quality ...]        (default: 5)
# Environment:
#   DURATION=5s      wrk duration per round
#   ROUNDS=3         rounds per quality, alternating Caddy and nginx
#   CONNECTIONS=16   wrk connections (one wrk thread)
#   FILE=react-dom.production.min.js   the script wrk requests
#   NGINX_WINDOW=1m  nginx's brotli_window (1m matches Caddy's default window 20;
#                    nginx's own default is 512k)
#   CORPUS=npm|sample  npm (default): `npm pack` well-known bundles into a
#                    temp dir, falling back to the committed sample
#                    brotli/testdata/corpus when the registry is unreachable.
#
# Prints: the corpus's total size uncompressed, with Caddy's gzip (level 5)
# and with br at each quality from Caddy and from nginx; then requests/s
# and requests per CPU-second of each server.
# Needs: go, wrk, curl, python3, bc, nginx-light, libnginx-mod-http-brotli-filter, npm
# (optional). Everything listens on 127.0.0.1 and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

qualities=("${@:-5}")
duration=${DURATION:-5s}
rounds=${ROUNDS:-3}
connections=${CONNECTIONS:-16}
file=${FILE:-react-dom.production.min.js}
nginx_module=/usr/lib/nginx/modules/ngx_http_brotli_filter_module.so

for cmd in go wrk curl nginx python3 bc; do
	command -v "$cmd" >/dev/null || { echo "bench-br: $cmd not found" >&2; exit 1; }
done
[[ -f $nginx_module ]] || { echo "bench-br: $nginx_module missing (apt-get install libnginx-mod-http-brotli-filter)" >&2; exit 1; }

work=$(mktemp -d)
chmod 755 "$work" # nginx workers run as nobody
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=integration/bench-lib.sh
. integration/bench-lib.sh # from the repository root (cd above)

# --- corpus -----------------------------------------------------------------
corpus=$work/corpus
mkdir -p "$corpus" "$work/npm"
# package@version : file inside the tarball
bundles=(
	three@0.150.1:build/three.min.js
	d3@7.9.0:dist/d3.min.js
	chart.js@4.4.4:dist/chart.umd.js
	vue@3.4.38:dist/vue.global.prod.js
	react-dom@18.3.1:umd/react-dom.production.min.js
	react@18.3.1:umd/react.production.min.js
	jquery@3.7.1:dist/jquery.min.js
	bootstrap@5.3.3:dist/js/bootstrap.bundle.min.js
	lodash@4.17.21:lodash.min.js
	moment@2.30.1:min/moment.min.js
)
fetched=no
if [[ ${CORPUS:-npm} == npm ]] && command -v npm >/dev/null; then
	fetched=yes
	for bundle in "${bundles[@]}"; do
		pkg=${bundle%%:*} path=${bundle#*:}
		tgz=$(cd "$work/npm" && timeout 60 npm pack --silent "$pkg" 2>/dev/null | tail -1) || { fetched=no; break; }
		tar -xzf "$work/npm/$tgz" -C "$work/npm" "package/$path" && mv "$work/npm/package/$path" "$corpus/" || { fetched=no; break; }
	done
fi
if [[ $fetched == yes ]]; then
	corpus_name="npm registry: ${bundles[*]%%:*}"
else
	rm -f "$corpus"/*
	cp brotli/testdata/corpus/*.js "$corpus/"
	corpus_name="committed sample brotli/testdata/corpus (see its README)"
fi
chmod 644 "$corpus"/*
[[ -f $corpus/$file ]] || { echo "bench-br: $file not in the corpus" >&2; exit 1; }

# --- servers ----------------------------------------------------------------
echo "building Caddy (./cmd/caddy)..." >&2
go build -o "$work/caddy" ./cmd/caddy

gzip_port=$(free_port)
declare -A caddy_port nginx_port
caddyfile="{
	admin off
	auto_https off
	persist_config off
	storage file_system $work/caddy-data
}
http://127.0.0.1:$gzip_port {
	root * $corpus
	encode gzip
	file_server
}
"
nginx_servers=""
for q in "${qualities[@]}"; do
	caddy_port[$q]=$(free_port)
	nginx_port[$q]=$(free_port)
	caddyfile+="
http://127.0.0.1:${caddy_port[$q]} {
	root * $corpus
	encode {
		br $q
	}
	file_server
}
"
	nginx_servers+="
	server {
		listen 127.0.0.1:${nginx_port[$q]} reuseport; # spread connections over both workers
		root $corpus;
		brotli_comp_level $q;
	}"
done
printf '%s' "$caddyfile" >"$work/Caddyfile"
HOME=$work XDG_DATA_HOME=$work XDG_CONFIG_HOME=$work "$work/caddy" run --config "$work/Caddyfile" --adapter caddyfile >"$work/caddy.log" 2>&1 &
pids+=($!)

mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<NGINX
load_module $nginx_module;
worker_processes 2;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
daemon off;
events { worker_connections 1024; }
http {
	include /etc/nginx/mime.types;
	access_log off;
	sendfile on;
	keepalive_requests 1000000;
	client_body_temp_path $work/nginx/tmp;
	gzip off;
	brotli on;
	brotli_window ${NGINX_WINDOW:-1m}; # 1m: Caddy's default window 20
	brotli_types application/javascript text/javascript;
$nginx_servers
}
NGINX
# glibc's default malloc returns the Brotli encoder's large buffers to the
# kernel after every response (mmap for each, trim after free); these tunables,
# inherited by the workers, keep them in the heap as Go's pool keeps Caddy's.
GLIBC_TUNABLES=glibc.malloc.mmap_threshold=8388608:glibc.malloc.trim_threshold=67108864 \
	nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" 2>>"$work/nginx/error.log" &
pids+=($!)

wait_for() {
	for _ in $(seq 100); do
		curl -fs -o /dev/null "http://127.0.0.1:$1/$file" && return 0
		sleep 0.1
	done
	echo "bench-br: nothing answers on port $1" >&2
	cat "$work/caddy.log" >&2
	exit 1
}
wait_for "$gzip_port"
for q in "${qualities[@]}"; do wait_for "${caddy_port[$q]}"; wait_for "${nginx_port[$q]}"; done

# bytes on the wire for one file, refusing an answer in the wrong encoding
wire_bytes() { # port encoding file
	curl -fs -D "$work/headers" -H "Accept-Encoding: $2" -o "$work/body" "http://127.0.0.1:$1/$3"
	grep -qi "^content-encoding: $2" "$work/headers" || { echo "bench-br: port $1 did not answer $3 with $2" >&2; exit 1; }
	wc -c <"$work/body"
}
corpus_bytes() { # port encoding
	local total=0
	for f in "$corpus"/*.js; do total=$((total + $(wire_bytes "$1" "$2" "$(basename "$f")"))); done
	echo "$total"
}

raw=$(cat "$corpus"/*.js | wc -c)
gz=$(corpus_bytes "$gzip_port" gzip)
echo
echo "corpus: $(ls "$corpus" | wc -l) minified scripts from the $corpus_name"
printf '%-34s %10s %8s\n' "encoding" "bytes" "x gzip"
printf '%-34s %10d %8.3f\n' "uncompressed" "$raw" "$(bc -l <<<"$raw/$gz")"
printf '%-34s %10d %8.3f\n' "Caddy gzip (level 5)" "$gz" 1
for q in "${qualities[@]}"; do
	cb=$(corpus_bytes "${caddy_port[$q]}" br)
	nb=$(corpus_bytes "${nginx_port[$q]}" br)
	printf '%-34s %10d %8.3f\n' "Caddy br quality $q" "$cb" "$(bc -l <<<"$cb/$gz")"
	printf '%-34s %10d %8.3f\n' "nginx br quality $q (C encoder)" "$nb" "$(bc -l <<<"$nb/$gz")"
done

# --- wrk --------------------------------------------------------------------
# The machine may be shared, so besides requests/s (wall clock) each run
# counts the CPU time the server itself used: requests per CPU-second is
# what one core of each server delivers, whatever else is running. Rounds
# alternate Caddy and nginx so that outside load falls on both alike.
wrk_args=(-t1 -c"$connections" --timeout 60s -H 'Accept-Encoding: br')
clk_tck=$(getconf CLK_TCK)
measure() { # port pid: prints "requests seconds cpu-seconds"
	local before after out
	before=$(cpu_ticks "$2")
	out=$(wrk "${wrk_args[@]}" -d"$duration" "http://127.0.0.1:$1/$file")
	after=$(cpu_ticks "$2")
	awk -v cpu="$(bc -l <<<"($after - $before) / $clk_tck")" \
		'/requests in/ {gsub(/s,/, "", $4); print $1, $4, cpu}' <<<"$out"
}
ratio() { if [[ $(bc <<<"$2 > 0") == 1 ]]; then printf '%.2f' "$(bc -l <<<"$1 / $2")"; else echo n/a; fi; }
echo
echo "wrk ${wrk_args[*]} -d$duration /$file ($(wc -c <"$corpus/$file") bytes), $rounds rounds, $(nproc) cores shared by servers, wrk and anything else running"
printf '%-8s %12s %12s %8s %16s %16s %8s\n' quality "Caddy req/s" "nginx req/s" ratio "Caddy req/CPU-s" "nginx req/CPU-s" ratio
caddy_pid=${pids[0]} nginx_pid=${pids[1]}
for q in "${qualities[@]}"; do
	# warm both (Caddy's encoder pool, nginx's workers), then measure
	wrk "${wrk_args[@]}" -d2s "http://127.0.0.1:${caddy_port[$q]}/$file" >/dev/null
	wrk "${wrk_args[@]}" -d2s "http://127.0.0.1:${nginx_port[$q]}/$file" >/dev/null
	cr=0 cs=0 cc=0 nr=0 ns=0 nc=0
	for _ in $(seq "$rounds"); do
		read -r r t u < <(measure "${caddy_port[$q]}" "$caddy_pid")
		cr=$((cr + r)) cs=$(bc -l <<<"$cs + $t") cc=$(bc -l <<<"$cc + $u")
		read -r r t u < <(measure "${nginx_port[$q]}" "$nginx_pid")
		nr=$((nr + r)) ns=$(bc -l <<<"$ns + $t") nc=$(bc -l <<<"$nc + $u")
	done
	c_rps=$(bc -l <<<"$cr / $cs") n_rps=$(bc -l <<<"$nr / $ns")
	c_cpu=$(bc -l <<<"$cr / ($cc + 0.000001)") n_cpu=$(bc -l <<<"$nr / ($nc + 0.000001)")
	printf '%-8s %12.2f %12.2f %8s %16.2f %16.2f %8s\n' "$q" "$c_rps" "$n_rps" "$(ratio "$c_rps" "$n_rps")" \
		"$c_cpu" "$n_cpu" "$(ratio "$c_cpu" "$n_cpu")"
done
