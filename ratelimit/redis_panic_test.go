package ratelimit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/rueidis"
)

// A panic while connecting happens on a goroutine of the module's own, where
// net/http cannot recover it: it must become the decision's error (on_error
// applies) and leave the process running.
func TestRedisConnectPanicIsAnError(t *testing.T) {
	panicking := func(rueidis.ClientOption) (rueidis.Client, error) { panic("injected connect panic") }
	orig := rueidisNewClient.Swap(&panicking)
	t.Cleanup(func() { rueidisNewClient.Store(orig) })

	h := provision(t, &Handler{
		Zones: []*Zone{{Name: "r-connect-panic", Rate: "1/1h"}},
		Store: &Store{Type: "redis", Redis: &RedisStore{Address: "127.0.0.1:1", Timeout: caddy.Duration(time.Second), OnError: "deny"}},
	}, nil)
	var out [1]outcome
	_, err := h.redis.decide(context.Background(), []requestKey{{text: "k"}}, out[:], nil, allZones)
	if err == nil || !strings.Contains(err.Error(), "injected connect panic") {
		t.Fatalf("decision after a panicking connect: %v, want the panic as its error", err)
	}
}
