package ratelimit

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// maxRequests caps n in n/duration so interval and tolerance arithmetic in
// nanoseconds cannot overflow.
const maxRequests = 1_000_000_000

// maxWindow bounds a rate's duration and a burst's refill time (burst times
// the spacing): longer windows are not useful for rate limiting, and with
// both bounded a TAT stays within about two years of now, far from int64's
// limit.
const maxWindow = 366 * 24 * time.Hour

// rate is a parsed `<n>/<duration>`.
type rate struct {
	n      int64
	period time.Duration
}

// parseRate parses `<n>/<duration>`, e.g. "100/1m", "10/s", "5/500ms",
// "1000/1d". A duration without a number ("s", "m", "h", "d") means one unit.
func parseRate(s string) (rate, error) {
	num, per, ok := strings.Cut(s, "/")
	if !ok {
		return rate{}, fmt.Errorf("rate %q: want <n>/<duration>, e.g. 100/1m or 10/s", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || n > maxRequests {
		return rate{}, fmt.Errorf("rate %q: request count must be a whole number in 1..%d", s, maxRequests)
	}
	if per != "" && (per[0] < '0' || per[0] > '9') {
		per = "1" + per
	}
	if u := unknownUnit(per); u != "" {
		return rate{}, fmt.Errorf("rate %q: unit %q is not a duration unit: use one of %s, e.g. %s/1m", s, u, validUnits, num)
	}
	d, err := caddy.ParseDuration(per)
	if err != nil {
		return rate{}, fmt.Errorf("rate %q: duration: %v (units: %s)", s, err, validUnits)
	}
	if d <= 0 {
		return rate{}, fmt.Errorf("rate %q: duration must be positive", s)
	}
	if d > maxWindow {
		return rate{}, fmt.Errorf("rate %q: duration %s is longer than the maximum of 366 days (8784h): use a shorter duration with a proportionally smaller count", s, d)
	}
	if d/time.Duration(n) < time.Microsecond {
		return rate{}, fmt.Errorf("rate %q: at most one request per microsecond; use a longer duration", s)
	}
	return rate{n: n, period: d}, nil
}

// validUnits are the units a rate's duration takes (caddy.ParseDuration's).
const validUnits = "ns, us (or µs), ms, s, m, h, d"

// unknownUnit is the first unit in a duration that caddy.ParseDuration
// would not take ("minute" in "1minute"), or "" if every unit is valid, so
// the error names what the user wrote rather than Go's wording.
func unknownUnit(d string) string {
	for i := 0; i < len(d); {
		j := i
		for j < len(d) && (d[j] == '.' || (d[j] >= '0' && d[j] <= '9')) {
			j++
		}
		k := j
		for k < len(d) && d[k] != '.' && (d[k] < '0' || d[k] > '9') {
			k++
		}
		switch u := d[j:k]; u {
		case "ns", "us", "µs", "μs", "ms", "s", "m", "h", "d":
		default:
			return u
		}
		i = k
	}
	return ""
}

// defaultBurst is a zone's burst when it sets none: n-1, so `rate n/T` is
// a bucket of n, as quotas read ("1000 an hour" lets 1000 through at once,
// and refills at 1000 per hour), and as RateLimit-Policy announces it.
func defaultBurst(r rate) int64 { return r.n - 1 }

// String formats r so that parseRate gives it back.
func (r rate) String() string {
	return strconv.FormatInt(r.n, 10) + "/" + r.period.String()
}

// interval is GCRA's emission interval T: the spacing between requests at
// the sustained rate. Truncated to the nanosecond, so never stricter than
// the configured rate.
func (r rate) interval() int64 { return int64(r.period) / r.n }

// policyWindow returns the quota and whole-second window announced in
// RateLimit-Policy: the window is the period rounded up to whole seconds and
// the quota scaled to it (5/500ms is announced as q=10;w=1), rounded down
// so it never promises more than the rate allows. n·seconds·1e9 overflows
// int64 for long windows (1000000/1d), so the product is taken in 128 bits;
// the quotient is below n + 10^6 (the period is at least n µs) and fits.
func (r rate) policyWindow() (quota, seconds int64) {
	seconds = ceilSeconds(r.period)
	hi, lo := bits.Mul64(uint64(r.n), uint64(seconds)*uint64(time.Second))
	q, _ := bits.Div64(hi, lo, uint64(r.period))
	return int64(q), seconds
}
