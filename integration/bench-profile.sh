#!/usr/bin/env bash
# bench-profile.sh: where a request's CPU goes in Caddy, by profile: plain
# reverse_proxy and substitute on the 1 MB rustdoc page (nginx origin, the
# 10 rules of bench-substitute.sh; substitute_gzip: the origin answers gzip), respond, client_ip and client_ip +
# throttle (memory store, random callers, headers on). Under wrk, Caddy's
# admin endpoint gives a CPU profile (/debug/pprof/profile) and allocation
# profiles before and after (/debug/pprof/allocs, diffed); the table gives,
# per request, the CPU of the functions that tell the costs apart and the
# objects allocated, so two builds' tables compare directly.
#
#   integration/bench-profile.sh [seconds, default 10]
#   CADDY_BIN=/path/to/caddy ...   # default: ./cmd/caddy built here
#   KEEP=/dir ...                  # keep the profiles (cpu-<row>.pb.gz, allocs*-<row>.pb.gz) there
#
# Absolute figures follow the machine's load (CPU per request rises when
# other processes share the cores); compare rows within one run, and
# builds by running this once per build back to back.
# Needs: go, wrk, nginx, curl, python3. Not part of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER=${1:-10}
# shellcheck source=integration/bench-lib.sh
. integration/bench-lib.sh
bench_start bench-profile wrk nginx curl python3 go
caddy_binary "$PWD" "$WORK/caddy"
OUT=${KEEP:-$WORK/prof}
mkdir -p "$OUT" "$WORK/www" "$WORK/origin"
cp substitute/internal/engine/testdata/rustc-book.html "$WORK/www/page.html"
gzip -6 -k "$WORK/www/page.html" # the gzip origin serves it precompressed (gzip_static)
chmod -R a+rX "$WORK/www"

origin=$(free_port) origin_gz=$(free_port) admin=$(free_port)
cat >"$WORK/origin/nginx.conf" <<NGX
worker_processes 1;
pid $WORK/origin/nginx.pid;
error_log $WORK/origin/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	include /etc/nginx/mime.types;
	client_body_temp_path $WORK/origin; proxy_temp_path $WORK/origin; fastcgi_temp_path $WORK/origin;
	uwsgi_temp_path $WORK/origin; scgi_temp_path $WORK/origin;
	server { listen 127.0.0.1:$origin; root $WORK/www; sendfile on; open_file_cache max=16; }
	server { listen 127.0.0.1:$origin_gz; root $WORK/www; gzip_static on; gzip_proxied any; }
}
NGX
nginx -p "$WORK/origin" -c "$WORK/origin/nginx.conf" -g 'daemon off;' &
PIDS+=($!)

names=(reverse_proxy substitute substitute_gzip respond client_ip throttle)
paths=(/page.html /page.html /page.html / / /)
conns=(16 16 16 64 64 64)
declare -A port
for i in "${!names[@]}"; do port[$i]=$(free_port); done
subst_site() { # port origin
	printf 'http://127.0.0.1:%s {\n\tsubstitute {\n' "$1"
	substitute_rules
	printf '\t}\n\treverse_proxy 127.0.0.1:%s\n}\n' "$2"
}
clientip=$'\tclient_ip {\n\t\ttrusted_proxies 127.0.0.0/8 10.0.0.0/8\n\t\thops 3\n\t}'
{
	caddy_global "127.0.0.1:$admin" "$WORK/data" | sed 's/^}$/\tlog default {\n\t\tlevel ERROR\n\t}\n}/'
	printf 'http://127.0.0.1:%s {\n\treverse_proxy 127.0.0.1:%s\n}\n' "${port[0]}" "$origin"
	subst_site "${port[1]}" "$origin"
	subst_site "${port[2]}" "$origin_gz"
	printf 'http://127.0.0.1:%s {\n\trespond "ok"\n}\n' "${port[3]}"
	printf 'http://127.0.0.1:%s {\n%s\n\trespond "ok"\n}\n' "${port[4]}" "$clientip"
	printf 'http://127.0.0.1:%s {\n%s\n\tthrottle {\n\t\tzone bench {\n\t\t\trate 1000000/s\n\t\t\tburst 1000000\n\t\t}\n\t}\n\trespond "ok"\n}\n' "${port[5]}" "$clientip"
} >"$WORK/Caddyfile"
HOME=$WORK XDG_DATA_HOME=$WORK/data XDG_CONFIG_HOME=$WORK/config \
	"$WORK/caddy" run --config "$WORK/Caddyfile" --adapter caddyfile >"$WORK/caddy.log" 2>&1 &
PIDS+=($!)
wait_ready /page.html "$origin"
# The gzip origin must answer gzip to Caddy's requests (nginx's gzip_proxied
# off would answer identity to any request with Via, which Caddy sends).
for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$origin_gz/page.html" && break; sleep 0.1; done
curl -fs -o /dev/null -D - -H 'Accept-Encoding: gzip' -H 'Via: 1.1 Caddy' "http://127.0.0.1:$origin_gz/page.html" | grep -qi '^content-encoding: gzip' ||
	{ echo "$0: the gzip origin does not answer gzip" >&2; exit 1; }
wait_ready / "${port[@]}"

cat >"$WORK/callers.lua" <<'LUA'
math.randomseed(os.time())
request = function()
	local ip = math.random(1, 223) .. "." .. math.random(0, 255) .. "." .. math.random(0, 255) .. "." .. math.random(1, 254)
	wrk.headers["X-Forwarded-For"] = ip .. ", 10.1.1.1, 10.2.2.2"
	-- a browser's: the gzip origin then answers gzip, decoded by substitute
	wrk.headers["Accept-Encoding"] = "gzip, deflate, br, zstd"
	return wrk.format(nil)
end
LUA

pprof_url=http://127.0.0.1:$admin/debug/pprof
for i in "${!names[@]}"; do
	n=${names[$i]}
	wrk -t2 -c"${conns[$i]}" -d2s -s "$WORK/callers.lua" "http://127.0.0.1:${port[$i]}${paths[$i]}" >/dev/null # warm up
	curl -fs -o "$OUT/allocs0-$n.pb.gz" "$pprof_url/allocs"
	wrk -t2 -c"${conns[$i]}" -d"$((SECONDS_PER + 3))s" -s "$WORK/callers.lua" "http://127.0.0.1:${port[$i]}${paths[$i]}" >"$OUT/wrk-$n.txt" &
	wrk_pid=$!
	sleep 1
	curl -fs -o "$OUT/cpu-$n.pb.gz" "$pprof_url/profile?seconds=$SECONDS_PER"
	wait "$wrk_pid"
	curl -fs -o "$OUT/allocs-$n.pb.gz" "$pprof_url/allocs"
	echo "$n: $(awk '/^Requests\/sec/ {print $2}' "$OUT/wrk-$n.txt") requests/s" >&2
done

# Rows: label and the function (pprof's name, a regexp) whose cumulative CPU
# it shows; "-" before a name subtracts that function's cumulative CPU.
cat >"$WORK/rows.txt" <<'ROWS'
all Caddy CPU|TOTAL
engine (substitute's Stream.Write, less its output)|engine\.\(\*Stream\)\.Write$ -substitute\.\(\*output\)\.Write$ -substitute\.\(\*output\)\.WriteString$
  of which the prefilter (teddy)|engine\.\(\*prefilter\)\.next$
substitute's output (buffer copy and the writes under it)|substitute\.\(\*output\)\.Write$ substitute\.\(\*output\)\.WriteString$ substitute\.\(\*output\)\.end$
  of which copying into the buffer (memmove)|MEMMOVE_BUFIO
decoder goroutine, less the engine it feeds|substitute\.\(\*decoder\)\.run$ -engine\.\(\*Stream\)\.Write$
  of which gzip inflate|compress/gzip\.\(\*Reader\)\.(Read|WriteTo)$
read syscalls (upstream and client)|^syscall\.read$
write syscalls (client and upstream)|^syscall\.write$
reverse_proxy's copy loop, all of it|reverseproxy\.Handler\.copyBuffer$
client_ip handler, less next|clientip\.\(\*Handler\)\.ServeHTTP$ -ratelimit\.\(\*Handler\)\.ServeHTTP$ -caddyhttp\.StaticResponse\.ServeHTTP$
throttle handler, less next|ratelimit\.\(\*Handler\)\.ServeHTTP$ -caddyhttp\.StaticResponse\.ServeHTTP$
  of which RateLimit fields (setHeaders)|ratelimit\.\(\*Handler\)\.setHeaders$
  of which the partition key's HMAC (pk)|ratelimit\.requestKey\.pk$
  of which the decision (memory store)|ratelimit\.\(\*Handler\)\.decide$
net/http writing response header fields|net/http\.Header\.writeSubset$
allocation (mallocgc)|^runtime\.mallocgc$
garbage collection (background mark)|^runtime\.gcBgMarkWorker$
ROWS
python3 - "$OUT" "$WORK/rows.txt" "${names[@]}" <<'PY'
import re, subprocess, sys
out, rowsfile, names = sys.argv[1], sys.argv[2], sys.argv[3:]
def sec(v):
    for suf, f in (("ms", 1e-3), ("us", 1e-6), ("µs", 1e-6), ("s", 1.0)):
        if v.endswith(suf):
            return float(v[: -len(suf)]) * f
    return float(v)
def pprof(*args):
    return subprocess.run(["go", "tool", "pprof", *args], capture_output=True, text=True).stdout
rows = [l.rstrip("\n").split("|", 1) for l in open(rowsfile) if l.strip()]  # a spec may hold "|"
table = {}
for n in names:
    txt = pprof("-top", "-cum", "-nodecount=100000", f"{out}/cpu-{n}.pb.gz")
    total = sec(re.search(r"Total samples = (\S+)", txt).group(1))
    cum = {}
    for line in txt.splitlines():
        f = line.split()
        if len(f) >= 6 and f[1].endswith("%") and f[4].endswith("%"):
            cum[" ".join(f[5:])] = sec(f[3])
    peek = pprof("-peek", "runtime.memmove$", f"{out}/cpu-{n}.pb.gz")
    bufio_memmove = 0.0
    for mm in re.finditer(r"^\s*(\S+)\s+\S+%\s+\|\s+bufio\.\(\*Writer\)\.Write(String)?$", peek, re.M):
        bufio_memmove += sec(mm.group(1))
    wrk = open(f"{out}/wrk-{n}.txt").read()
    rps = float(re.search(r"Requests/sec:\s+(\S+)", wrk).group(1))
    seconds = float(re.search(r"Duration: ([\d.]+)s", txt).group(1))
    nreq = rps * seconds
    vals = []
    for label, spec in rows:
        v = 0.0
        for term in spec.split():
            sign = -1 if term.startswith("-") else 1
            term = term.lstrip("-")
            if term == "TOTAL":
                v += total
            elif term == "MEMMOVE_BUFIO":
                v += bufio_memmove
            else:
                v += sign * sum(c for name, c in cum.items() if re.search(term, name))
        vals.append(v * 1e6 / nreq)
    a = pprof("-sample_index=alloc_objects", "-base", f"{out}/allocs0-{n}.pb.gz", "-top", "-nodecount=1", f"{out}/allocs-{n}.pb.gz")
    m = re.search(r"of (\d+) total", a)
    objs = int(m.group(1)) if m else 0
    wrkreq = int(re.search(r"(\d+) requests in", wrk).group(1))
    table[n] = (rps, vals, objs / max(wrkreq, 1))
print()
print("| CPU per request, µs (share of Caddy's CPU) | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
print("| requests/s (wrk) | " + " | ".join(f"{table[n][0]:.0f}" for n in names) + " |")
for k, (label, _) in enumerate(rows):
    cells = []
    for n in names:
        v, tot = table[n][1][k], table[n][1][0]
        cells.append("" if v <= 0 else (f"{v:.0f}" if v >= 100 else f"{v:.2f}") + ("" if k == 0 else f" ({100 * v / tot:.0f}%)"))
    print(f"| {label} | " + " | ".join(cells) + " |")
print("| objects allocated per request (allocs profile, sampled) | " + " | ".join(f"{table[n][2]:.0f}" for n in names) + " |")
PY
