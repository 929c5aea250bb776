package substitute

import (
	"context"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestServerTimingVar: with server_timing's marker variable set, a
// substituted body leaves its scan time in server_timing.substitute when it
// ends; a body passed through, or a request without the marker, leaves
// nothing.
func TestServerTimingVar(t *testing.T) {
	h := basicHandler(t)
	for _, tc := range []struct {
		name  string
		on    bool
		ctype string
		want  bool
	}{
		{"marked, substituted", true, "text/html", true},
		{"marked, passed through", true, "image/png", false},
		{"unmarked", false, "text/html", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]any{}
			if tc.on {
				vars[serverTimingOn] = true
			}
			r := request("GET", "/")
			r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
			rec := serve(t, h, r, origin(200, map[string]string{"Content-Type": tc.ctype}, []byte("see origin.example id-7"), 4))
			if tc.ctype == "text/html" && rec.Body.String() != "see edge.example n7" {
				t.Fatalf("body %q", rec.Body.String())
			}
			d, ok := vars[serverTimingSubstitute].(time.Duration)
			if ok != tc.want || d < 0 {
				t.Errorf("%s = %#v, want set %v", serverTimingSubstitute, vars[serverTimingSubstitute], tc.want)
			}
		})
	}
}
