# bench-lib.sh: helpers the integration/bench-*.sh scripts source.

# free_port prints a TCP port on 127.0.0.1 that nothing listens on.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# median prints the median of the numbers on standard input (any spacing).
median() {
	tr -s ' \t' '\n\n' | grep -v '^$' | sort -g |
		awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'
}

# cpu_ticks pids...: user+system clock ticks of these processes and their
# children (getconf CLK_TCK per second).
cpu_ticks() {
	local total=0 pid
	for pid in "$@" $(ps -o pid= --ppid "$(tr ' ' ',' <<<"$*")" 2>/dev/null); do
		[[ -r /proc/$pid/stat ]] || continue
		total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
	done
	echo "$total"
}
