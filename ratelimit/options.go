package ratelimit

import (
	"fmt"
	"strings"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/enum"
)

// Each bound and enumeration is checked by one function here, called by both
// the Caddyfile parser (so `caddy adapt` points at the offending line) and
// Provision/Validate (for JSON configs), so the two can never disagree.

// Mode is whether the handler rejects (enforce) or only reports (observe).
// In JSON it is the plain string.
type Mode string

// Modes.
const (
	ModeEnforce Mode = "enforce"
	ModeObserve Mode = "observe"
)

func parseMode(s string) (Mode, error) {
	v, err := enum.Parse(s, ModeEnforce, ModeObserve)
	if err != nil {
		return "", fmt.Errorf("throttle: mode %w", err)
	}
	return v, nil
}

// StoreType is where zone state lives. In JSON it is the plain string.
type StoreType string

// Store types.
const (
	StoreMemory StoreType = "memory"
	StoreRedis  StoreType = "redis"
)

func parseStoreType(s string) (StoreType, error) {
	v, err := enum.Parse(s, StoreMemory, StoreRedis)
	if err != nil {
		return "", fmt.Errorf("throttle: store %w", err)
	}
	return v, nil
}

// OnError is what the redis store does with a request when Redis fails.
// In JSON it is the plain string.
type OnError string

// On-error actions.
const (
	OnErrorAllow OnError = "allow"
	OnErrorDeny  OnError = "deny"
)

func parseOnError(s string) (OnError, error) {
	v, err := enum.Parse(s, OnErrorAllow, OnErrorDeny)
	if err != nil {
		return "", fmt.Errorf("throttle: store redis: on_error %w", err)
	}
	return v, nil
}

// OnEmptyKey is what a zone does with a request whose key expands to
// nothing (every placeholder in it empty). In JSON it is the plain string.
type OnEmptyKey string

// On-empty-key policies.
const (
	// EmptyKeyClientIP keys the request on the caller's address instead.
	EmptyKeyClientIP OnEmptyKey = "client_ip"
	// EmptyKeySkip leaves the request out of this zone.
	EmptyKeySkip OnEmptyKey = "skip"
	// EmptyKeyDeny rejects the request.
	EmptyKeyDeny OnEmptyKey = "deny"
)

func parseOnEmptyKey(zone, s string) (OnEmptyKey, error) {
	v, err := enum.Parse(s, EmptyKeyClientIP, EmptyKeySkip, EmptyKeyDeny)
	if err != nil {
		return "", zoneError(zone, fmt.Errorf("on_empty_key %w", err))
	}
	return v, nil
}

// LogLevel is the level of the line a rejection logs, or off. In JSON it
// is the plain string.
type LogLevel string

// Log levels.
const (
	LogDebug LogLevel = "debug"
	LogInfo  LogLevel = "info"
	LogWarn  LogLevel = "warn"
	LogError LogLevel = "error"
	LogOff   LogLevel = "off"
)

func parseLogLevel(s string) (LogLevel, error) {
	v, err := enum.Parse(s, LogDebug, LogInfo, LogWarn, LogError, LogOff)
	if err != nil {
		return "", fmt.Errorf("throttle: log_rejections %w", err)
	}
	return v, nil
}

// maxConcurrent bounds `concurrent <n>`: far above any one caller's fair
// share of a server, and the count fits anywhere.
const maxConcurrent = 1_000_000

// checkConcurrent wants 1..maxConcurrent requests in flight, and no rate
// settings beside it: a zone limits either how often or how many at once.
func checkConcurrent(z *Zone) error {
	if z.Concurrent < 1 || z.Concurrent > maxConcurrent {
		return zoneError(z.Name, fmt.Errorf("concurrent %d: must be 1..%d requests in flight per key", z.Concurrent, maxConcurrent))
	}
	if z.Rate != "" || z.Burst != nil || z.ChargeOn != nil {
		return zoneError(z.Name, fmt.Errorf("concurrent with rate, burst or charge_on: a zone limits either requests in flight (concurrent) or how often (rate); make two zones"))
	}
	return nil
}

func checkZoneCount(n int) error {
	if n == 0 {
		return fmt.Errorf("throttle: no zone: add `zone <name> { rate <n>/<duration> }`")
	}
	if n > maxZones {
		return fmt.Errorf("throttle: %d zones: at most %d per handler", n, maxZones)
	}
	return nil
}

func checkStatus(status int) error {
	if status < 400 || status > 599 {
		return fmt.Errorf("throttle: status %d: must be an HTTP error status, 400..599", status)
	}
	return nil
}

func checkMaxKeys(n int) error {
	if n < 1 {
		return fmt.Errorf("throttle: store memory %d: max_keys must be at least 1", n)
	}
	return nil
}

func checkDB(n int) error {
	if n < 0 {
		return fmt.Errorf("throttle: store redis: db %d: must be a database number, 0 or more", n)
	}
	return nil
}

func checkTimeout(t time.Duration) error {
	if t <= 0 {
		return fmt.Errorf("throttle: store redis: timeout %s: must be a positive duration such as 100ms", t)
	}
	return nil
}

// checkTLS refuses TLS settings that cannot mean what they say.
func checkTLS(t *RedisTLS) error {
	if t == nil {
		return nil
	}
	if (t.Cert == "") != (t.Key == "") {
		return fmt.Errorf("throttle: store redis: tls: cert and key go together (a client certificate and its private key): give both or neither")
	}
	if t.InsecureSkipVerify && (t.CA != "" || t.ServerName != "") {
		return fmt.Errorf("throttle: store redis: tls: insecure_skip_verify with ca or server_name: it would ignore them and accept any server; remove insecure_skip_verify")
	}
	return nil
}

// zoneError names the zone an error is about, always the same way.
func zoneError(zone string, err error) error {
	return fmt.Errorf("throttle: zone %q: %v", zone, err)
}

// ipv4_prefix and ipv6_prefix start at 1: 0 would read as "unset" in JSON.
func checkIPv4Prefix(zone string, bits int) error {
	if bits < 1 || bits > 32 {
		return zoneError(zone, fmt.Errorf("ipv4_prefix %d: must be 1..32", bits))
	}
	return nil
}

func checkIPv6Prefix(zone string, bits int) error {
	if bits < 1 || bits > 128 {
		return zoneError(zone, fmt.Errorf("ipv6_prefix %d: must be 1..128", bits))
	}
	return nil
}

// checkBurst bounds burst so a full burst refills within maxWindow at r.
func checkBurst(zone string, burst int64, r rate) error {
	if maxBurst := int64(maxWindow) / r.interval(); burst < 0 || burst > maxBurst {
		return zoneError(zone, fmt.Errorf("burst %d: must be 0..%d at this rate (a full burst must refill within 366 days)", burst, maxBurst))
	}
	return nil
}

// checkChargeOn wants at least one status, each one a response can end
// with: a final status or 101 Switching Protocols. Other 1xx statuses are
// interim responses, never what a request is settled by: a zone charging
// only those would charge nothing.
func checkChargeOn(zone string, statuses []int) error {
	if len(statuses) == 0 {
		return zoneError(zone, fmt.Errorf("charge_on: no status: list the statuses to charge, e.g. charge_on status 401 403"))
	}
	for _, s := range statuses {
		if s < 100 || s > 599 {
			return zoneError(zone, fmt.Errorf("charge_on status %d: must be an HTTP status, 100..599", s))
		}
		if s < 200 && s != 101 {
			return zoneError(zone, fmt.Errorf("charge_on status %d: an informational (1xx) status is never a response's final status, so it would charge nothing: list final statuses (200..599) or 101", s))
		}
	}
	return nil
}

// checkKeyPrefix refuses a Redis key_prefix (placeholders expanded) holding
// a brace. Redis Cluster picks a key's slot by the first {...} in its name:
// one in the prefix would replace the tag that keeps each caller's zones in
// one slot, so decisions across slots would be refused (and on_error allow
// would let everything through) or every key would land on one node.
func checkKeyPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("throttle: store redis: key_prefix %q holds a { or }: Redis Cluster reads braces in a key name as its hash tag, which the prefix must not set; use other characters, e.g. key_prefix edge:throttle:", prefix)
	}
	return nil
}

func checkRate(zone, s string) (rate, error) {
	if s == "" {
		return rate{}, zoneError(zone, fmt.Errorf("rate is required, e.g. rate 100/1m"))
	}
	r, err := parseRate(s)
	if err != nil {
		return rate{}, zoneError(zone, err)
	}
	return r, nil
}

func checkKey(zone, s string) (keyTemplate, error) {
	k, err := parseKeyTemplate(s)
	if err != nil {
		return keyTemplate{}, zoneError(zone, err)
	}
	return k, nil
}
