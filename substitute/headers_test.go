package substitute

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// cloneFields are the fields a site cloned under another host name needs
// rewritten.
var cloneFields = []string{"Location", "Content-Location", "Link", "Refresh", "Set-Cookie", "Content-Security-Policy"}

func cloneHandler(t testing.TB) *Handler {
	return provision(t, &Handler{
		Rules: []Rule{
			{Find: "origin.example", Replace: "clone.example"},
			{Find: `id-(\d+)`, Regex: true, Replace: "n$1"},
		},
		Headers: cloneFields,
	})
}

// headerOrigin answers status with the given fields (each value of a
// slice a field of its own) and body.
func headerOrigin(status int, hdr http.Header, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range hdr {
			w.Header()[k] = slices.Clone(v)
		}
		w.WriteHeader(status)
		if r.Method != http.MethodHead && body != "" {
			_, _ = w.Write([]byte(body))
		}
	}
}

// TestHeadersRewrittenOnEveryResponse: the named fields are rewritten
// whatever the status, type, method or no-transform, each value on its
// own; other fields are left alone.
func TestHeadersRewrittenOnEveryResponse(t *testing.T) {
	h := cloneHandler(t)
	hdr := http.Header{
		"Location":                {"https://origin.example/new?id-7"},
		"Content-Location":        {"/x/origin.example"},
		"Link":                    {`<https://origin.example/app.js>; rel=preload; as=script`, `<https://origin.example/>; rel=canonical`},
		"Refresh":                 {"5; url=https://origin.example/later"},
		"Set-Cookie":              {"a=1; Domain=origin.example; Path=/", "b=2; Domain=.origin.example", "c=3"},
		"Content-Security-Policy": {"default-src 'self' https://origin.example; img-src *.origin.example"},
		"X-Other":                 {"origin.example"},
	}
	want := http.Header{
		"Location":                {"https://clone.example/new?n7"},
		"Content-Location":        {"/x/clone.example"},
		"Link":                    {`<https://clone.example/app.js>; rel=preload; as=script`, `<https://clone.example/>; rel=canonical`},
		"Refresh":                 {"5; url=https://clone.example/later"},
		"Set-Cookie":              {"a=1; Domain=clone.example; Path=/", "b=2; Domain=.clone.example", "c=3"},
		"Content-Security-Policy": {"default-src 'self' https://clone.example; img-src *.clone.example"},
		"X-Other":                 {"origin.example"},
	}
	cases := []struct {
		name, method string
		status       int
		extra        map[string]string
	}{
		{"301", "GET", 301, nil},
		{"302 html", "GET", 302, map[string]string{"Content-Type": "text/html"}},
		{"200 html", "GET", 200, map[string]string{"Content-Type": "text/html"}},
		{"200 image", "GET", 200, map[string]string{"Content-Type": "image/png"}},
		{"200 no-transform", "GET", 200, map[string]string{"Content-Type": "text/html", "Cache-Control": "no-transform"}},
		{"304", "GET", 304, nil},
		{"404", "GET", 404, map[string]string{"Content-Type": "text/html"}},
		{"HEAD", "HEAD", 200, map[string]string{"Content-Type": "text/html"}},
		{"unknown encoding", "GET", 200, map[string]string{"Content-Type": "text/html", "Content-Encoding": "x-custom"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := hdr.Clone()
			for k, v := range c.extra {
				in.Set(k, v)
			}
			rec := serve(t, h, request(c.method, "/"), headerOrigin(c.status, in, "origin.example"))
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d", rec.Code, c.status)
			}
			for k, v := range want {
				if got := rec.Header()[k]; !slices.Equal(got, v) {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestHeadersHeadMatchesGet: HEAD gets the rewritten fields GET gets.
func TestHeadersHeadMatchesGet(t *testing.T) {
	h := cloneHandler(t)
	in := http.Header{"Content-Type": {"text/html"}, "Location": {"https://origin.example/"}, "Set-Cookie": {"a=1; Domain=origin.example"}}
	get := serve(t, h, request("GET", "/"), headerOrigin(200, in, "origin.example page"))
	head := serve(t, h, request("HEAD", "/"), headerOrigin(200, in, "origin.example page"))
	if !maps.EqualFunc(get.Header(), head.Header(), slices.Equal) {
		t.Errorf("HEAD header\n%v\ndiffers from GET's\n%v", head.Header(), get.Header())
	}
	if got := head.Header().Get("Location"); got != "https://clone.example/" {
		t.Errorf("HEAD Location %q", got)
	}
}

// TestHeadersWithoutStatusOrTypeMatch: status and types select bodies;
// header fields are rewritten on the others too.
func TestHeadersWithoutStatusOrTypeMatch(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: "origin.example", Replace: "clone.example"}}, Status: []int{200}, Types: []string{"text/html"}, Headers: []string{"location"}})
	rec := serve(t, h, request("GET", "/"), headerOrigin(302, http.Header{"Location": {"http://origin.example/a"}, "Content-Type": {"text/plain"}}, "origin.example"))
	if got := rec.Header().Get("Location"); got != "http://clone.example/a" {
		t.Errorf("Location %q", got)
	}
	if got := rec.Body.String(); got != "origin.example" {
		t.Errorf("body %q: a 302 text/plain body is not selected", got)
	}
}

// TestHeadersOddCaseKeys: a key written into the map in another case than
// Go's canonical one still names the field on the wire (HTTP/2 and HTTP/3
// lower-case every name), so it is rewritten too.
func TestHeadersOddCaseKeys(t *testing.T) {
	h := cloneHandler(t)
	next := func(w http.ResponseWriter, r *http.Request) {
		w.Header()["location"] = []string{"https://origin.example/1"}
		w.Header()["SET-COOKIE"] = []string{"a=1; Domain=origin.example"}
		w.Header()["Set-Cookie"] = []string{"b=1; Domain=origin.example"}
		w.WriteHeader(http.StatusFound)
	}
	rec := serve(t, h, request("GET", "/"), next)
	for k, want := range map[string]string{"location": "https://clone.example/1", "SET-COOKIE": "a=1; Domain=clone.example", "Set-Cookie": "b=1; Domain=clone.example"} {
		if got := rec.Header()[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
}

// TestHeadersPerValue: each value is a text of its own: ^ anchors at its
// start and a once rule fires once per value, not once per response.
func TestHeadersPerValue(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: `^https://origin\.example`, Regex: true, Replace: "https://clone.example", Once: true}}, Headers: []string{"Link"}})
	in := http.Header{"Link": {"<https://origin.example/a>", "https://origin.example/b", "https://origin.example/c https://origin.example/d"}}
	rec := serve(t, h, request("GET", "/"), headerOrigin(200, in, ""))
	want := []string{"<https://origin.example/a>", "https://clone.example/b", "https://clone.example/c https://origin.example/d"}
	if got := rec.Header()["Link"]; !slices.Equal(got, want) {
		t.Errorf("Link %q, want %q", got, want)
	}
}

// TestHeadersInvalidValueRemoved: a placeholder whose value holds a CR or
// LF would split the field: the value is removed, not sent as the upstream
// wrote it (which would switch the other rules off), and counted.
func TestHeadersInvalidValueRemoved(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: "origin.example", Replace: "{evil}"}}, Headers: []string{"Location", "Link"}})
	for _, evil := range []string{"x\r\nSet-Cookie: pwned=1", "x\nb", "x\x00", "x\x7f"} {
		before := testutil.ToFloat64(metrics.headerInvalid)
		r := request("GET", "/")
		r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("evil", evil)
		rec := serve(t, h, r, headerOrigin(302, http.Header{"Location": {"https://origin.example/"}, "Link": {"<https://other.example/>"}}, ""))
		if got, ok := rec.Header()["Location"]; ok {
			t.Errorf("%q: Location %q, want it removed", evil, got)
		}
		if got := rec.Header().Get("Link"); got != "<https://other.example/>" {
			t.Errorf("%q: Link %q, want the upstream's (no rule matched)", evil, got)
		}
		if n := testutil.ToFloat64(metrics.headerInvalid) - before; n != 1 {
			t.Errorf("%q: header_fields_total{result=invalid} grew by %v, want 1", evil, n)
		}
	}
	// A tab is valid in a field value.
	r := request("GET", "/")
	r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("evil", "a\tb")
	rec := serve(t, h, r, headerOrigin(302, http.Header{"Location": {"https://origin.example/"}}, ""))
	if got := rec.Header().Get("Location"); got != "https://a\tb/" {
		t.Errorf("Location %q", got)
	}
}

// TestHeadersCallerCannotSwitchOffRules: a caller whose placeholder makes
// one rule's output unsendable (a line feed, or an expansion past the
// bounds) gets the value removed, never the upstream's value with the
// other rules' redactions undone. Only the value concerned goes: the
// field's other values are sent rewritten.
func TestHeadersCallerCannotSwitchOffRules(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{
		{Find: "QRY", Replace: "{q}"},
		{Find: "origin.example", Replace: "clone.test"},
	}, Headers: []string{"Location", "Set-Cookie"}})
	in := http.Header{
		"Location":   {"https://origin.example/?QRY"},
		"Set-Cookie": {"a=QRY; Domain=origin.example", "b=1; Domain=origin.example"},
	}
	cases := []struct {
		name, q string
		reason  prometheus.Counter
	}{
		{"line feed", "\n", metrics.headerInvalid},
		{"past 64 KiB", strings.Repeat("q", maxHeaderValue), metrics.headerTooLong},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := testutil.ToFloat64(c.reason)
			r := request("GET", "/")
			r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("q", c.q)
			rec := serve(t, h, r, headerOrigin(302, in, ""))
			if got, ok := rec.Header()["Location"]; ok {
				t.Errorf("Location %q, want it removed", got)
			}
			if got, want := rec.Header()["Set-Cookie"], []string{"b=1; Domain=clone.test"}; !slices.Equal(got, want) {
				t.Errorf("Set-Cookie %q, want %q", got, want)
			}
			if n := testutil.ToFloat64(c.reason) - before; n != 2 {
				t.Errorf("counted %v, want 2", n)
			}
		})
	}
	// Many values each within 64 KiB spend the 1 MiB budget: those past it
	// are removed too.
	t.Run("past the budget", func(t *testing.T) {
		before := testutil.ToFloat64(metrics.headerOverBudget)
		r := request("GET", "/")
		r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("q", strings.Repeat("q", 60<<10))
		rec := serve(t, h, r, headerOrigin(302, http.Header{"Set-Cookie": slices.Repeat([]string{"a=QRY; Domain=origin.example"}, 40)}, ""))
		got := rec.Header()["Set-Cookie"]
		for _, v := range got {
			if strings.Contains(v, "origin.example") {
				t.Fatalf("a value sent as the upstream wrote it: %.40q", v)
			}
		}
		if n := testutil.ToFloat64(metrics.headerOverBudget) - before; int(n) != 40-len(got) || len(got) == 40 || len(got) == 0 {
			t.Errorf("%d values sent, over_budget grew by %v: want some sent and the others counted", len(got), n)
		}
	})
}

// TestHeadersBounded: a value over 64 KiB (no rule can be checked on it),
// or one whose replacement would grow past it, is removed and counted;
// so are the values past the 1 MiB of work a response may cost.
func TestHeadersBounded(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: "a", Replace: strings.Repeat("b", 100)}}, Headers: []string{"Set-Cookie", "Location"}})
	cases := []struct {
		name                   string
		values                 []string
		sent, long, overBudget int
	}{
		{"long input", []string{"a" + strings.Repeat("x", maxHeaderValue)}, 0, 1, 0},
		{"long input no rule matches", []string{strings.Repeat("x", maxHeaderValue+1)}, 0, 1, 0},
		{"grows past the value bound", []string{strings.Repeat("a", 1000)}, 0, 1, 0},
		{"fits", []string{strings.Repeat("a", 100)}, 1, 0, 0},
		// 40 values of 32 KiB: each costs 64 KiB read and written, so the
		// 16th passes the budget.
		{"many fields", slices.Repeat([]string{"a" + strings.Repeat("x", 32<<10)}, 40), 15, 0, 25},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			long, over := testutil.ToFloat64(metrics.headerTooLong), testutil.ToFloat64(metrics.headerOverBudget)
			rec := serve(t, h, request("GET", "/"), headerOrigin(200, http.Header{"Set-Cookie": c.values}, ""))
			got := rec.Header()["Set-Cookie"]
			if len(got) != c.sent {
				t.Fatalf("%d values sent, want %d", len(got), c.sent)
			}
			for i := range got {
				if got[i] == c.values[i] {
					t.Errorf("value %d sent unchanged", i)
				}
			}
			if n := testutil.ToFloat64(metrics.headerTooLong) - long; int(n) != c.long {
				t.Errorf("too_long grew by %v, want %d", n, c.long)
			}
			if n := testutil.ToFloat64(metrics.headerOverBudget) - over; int(n) != c.overBudget {
				t.Errorf("over_budget grew by %v, want %d", n, c.overBudget)
			}
		})
	}
}

// TestHeadersUpstreamSliceUntouched: the rewritten values go into a new
// slice; the upstream's (which reverse_proxy may share) is not written.
func TestHeadersUpstreamSliceUntouched(t *testing.T) {
	h := cloneHandler(t)
	upstream := []string{"a=1; Domain=origin.example", "b=2"}
	next := func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Set-Cookie"] = upstream
		w.WriteHeader(200)
	}
	rec := serve(t, h, request("GET", "/"), next)
	if got := rec.Header()["Set-Cookie"][0]; got != "a=1; Domain=clone.example" {
		t.Errorf("Set-Cookie %q", got)
	}
	if upstream[0] != "a=1; Domain=origin.example" {
		t.Errorf("upstream's slice written: %q", upstream)
	}
}

// TestHeadersEarlyHints: a 103's Link is rewritten, and the final
// response's fields are rewritten once from the originals, even with a
// rule whose output matches again.
func TestHeadersEarlyHints(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: "x", Replace: "xx"}}, Headers: []string{"Link"}})
	client := &hintRecorder{ResponseRecorder: httptest.NewRecorder()}
	next := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</x.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("Content-Type", "image/png")
		w.WriteHeader(http.StatusOK)
	}
	if err := h.ServeHTTP(client, request("GET", "/"), asCaddy(next)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"</xx.css>; rel=preload"}; !slices.Equal(client.hints, want) {
		t.Errorf("103 Link %q, want %q", client.hints, want)
	}
	if got := client.Header().Get("Link"); got != "</xx.css>; rel=preload" {
		t.Errorf("final Link %q, want it rewritten once", got)
	}
}

// hintRecorder is a client that records the Link fields of the 1xx
// responses it is sent.
type hintRecorder struct {
	*httptest.ResponseRecorder
	hints []string
}

func (h *hintRecorder) WriteHeader(code int) {
	if code >= 100 && code <= 199 {
		h.hints = append(h.hints, h.Header()["Link"]...)
		return
	}
	h.ResponseRecorder.WriteHeader(code)
}

// TestHeadersRangeRetryRewritesOnce: a 206 of a substitutable type is
// discarded and asked again without Range; a field an outer handler set
// before is rewritten once, from the original, not again on the retry.
func TestHeadersRangeRetryRewritesOnce(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: "x", Replace: "xx"}}, Headers: []string{"Link", "Location"}})
	calls := 0
	r := request("GET", "/")
	r.Header.Set("Range", "bytes=0-4")
	rec := httptest.NewRecorder()
	rec.Header().Set("Link", "</x.css>; rel=preload") // an outer handler's
	err := h.ServeHTTP(rec, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Location", "/x")
		rangeOrigin("text/html", "x body", &calls)(w, r)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || rec.Code != 200 {
		t.Fatalf("%d calls, status %d: want the retry's 200", calls, rec.Code)
	}
	if got := rec.Header()["Link"]; !slices.Equal(got, []string{"</xx.css>; rel=preload"}) {
		t.Errorf("Link %q, want it rewritten once", got)
	}
	if got := rec.Header()["Location"]; !slices.Equal(got, []string{"/xx"}) {
		t.Errorf("Location %q, want it rewritten once", got)
	}
}

// TestHeadersWithoutWriteHeader: a handler that writes nothing leaves
// net/http to send the header once the chain returns; it is rewritten too.
func TestHeadersWithoutWriteHeader(t *testing.T) {
	h := cloneHandler(t)
	rec := serve(t, h, request("GET", "/"), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "https://origin.example/")
	})
	if got := rec.Header().Get("Location"); got != "https://clone.example/" {
		t.Errorf("Location %q", got)
	}
}

// TestHeadersAbsentCostNothing: naming fields a response lacks allocates
// nothing more than not naming them.
func TestHeadersAbsentCostNothing(t *testing.T) {
	rules := []Rule{{Find: "origin.example", Replace: "clone.example"}}
	today := provision(t, &Handler{Rules: rules, Memo: MemoOff})
	named := provision(t, &Handler{Rules: rules, Memo: MemoOff, Headers: cloneFields})
	hdr := map[string]string{"Content-Type": "text/html", "Cache-Control": "max-age=60", "Etag": `"e"`, "Vary": "Accept-Encoding", "Date": "Mon, 02 Jan 2006 15:04:05 GMT"}
	body := []byte(strings.Repeat("<p>some page origin.example</p>", 60))
	allocs := func(h *Handler) float64 {
		next := asCaddy(origin(200, hdr, body, 32<<10))
		r := request("GET", "/")
		w := &discardWriter{hdr: http.Header{}}
		return testing.AllocsPerRun(200, func() {
			clear(w.hdr)
			if err := h.ServeHTTP(w, r, next); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Under -race sync.Pool drops what is put back, so either handler may
	// allocate a writer anew on any run: the bound holds only without it.
	if a, b := allocs(today), allocs(named); b > a && !raceEnabled {
		t.Errorf("%v allocations per response with headers named and absent, %v without headers", b, a)
	}
}

func TestHeadersValidate(t *testing.T) {
	rules := []Rule{{Find: "a", Replace: "b"}}
	cases := []struct {
		h    Handler
		want string
	}{
		{Handler{Rules: rules, Headers: []string{"Content-Length"}}, "Content-Length frames or encodes the response"},
		{Handler{Rules: rules, Headers: []string{"transfer-encoding"}}, "Transfer-Encoding frames or encodes"},
		{Handler{Rules: rules, Headers: []string{"Location", "LOCATION"}}, "Location is named twice"},
		{Handler{Rules: rules, Headers: []string{"Bad Name"}}, `"Bad Name" is not a header field name`},
		{Handler{Rules: []Rule{{Find: "a", Replace: "b\r\n"}}, Headers: []string{"Location"}}, "rule 1: replace \"a\": replacement holds byte 0x0d"},
	}
	for _, c := range cases {
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		err := provisionValidate(ctx, &c.h)
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.h.Headers, err, c.want)
		}
	}
	// Without headers, a line feed in a replacement is for the body.
	provision(t, &Handler{Rules: []Rule{{Find: "a", Replace: "b\n"}}})
}

// FuzzHeaderFields feeds arbitrary upstream fields (name as written in the
// map, values, a placeholder's value) through a handler naming Location
// and Set-Cookie. Whatever the input it must not panic; every value stays
// a value of its own; a field not named is untouched; a changed value
// holds no control character and is what the same text gets as a body.
func FuzzHeaderFields(f *testing.F) {
	f.Add("Location", "https://origin.example/id-7", uint8(1), "clone.example")
	f.Add("set-cookie", "a=1; Domain=origin.example", uint8(3), "x\r\ny")
	f.Add("SET-COOKIE", "origin.exampleorigin.example", uint8(2), "")
	f.Add("X-Other", "origin.example", uint8(1), "clone.example")
	f.Add("Location", "\x00origin.example\xff", uint8(1), "$1")
	h := provision(f, &Handler{
		Rules: []Rule{
			{Find: "origin.example", Replace: "{ph}"},
			{Find: `id-(\d+)`, Regex: true, Replace: "n$1"},
			{Find: `^x`, Regex: true, Replace: "y"},
		},
		Headers: []string{"Location", "Set-Cookie"},
		Types:   []string{"text/plain"},
		Memo:    MemoOff,
	})
	withPlaceholder := func(ph string) *http.Request {
		r := request("GET", "/")
		r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("ph", ph)
		return r
	}
	f.Fuzz(func(t *testing.T, key, value string, n uint8, ph string) {
		if key == "" || len(value) > 4096 || invalidFieldByte(value) >= 0 {
			return // an upstream's own control characters are net/http's to refuse
		}
		values := make([]string, int(n%4)+1)
		for i := range values {
			values[i] = value[:len(value)*(i+1)/len(values)]
		}
		rec := serve(t, h, withPlaceholder(ph), func(w http.ResponseWriter, r *http.Request) {
			w.Header()[key] = slices.Clone(values)
			w.WriteHeader(http.StatusFound)
		})
		got := rec.Header()[key]
		named := strings.EqualFold(key, "Location") || strings.EqualFold(key, "Set-Cookie")
		if !named {
			if !slices.Equal(got, values) {
				t.Fatalf("%s, not named, changed: %q to %q", key, values, got)
			}
			return
		}
		// Each value is sent as it is as a body (trimmed of SP and HTAB when
		// a rule matched), or removed when that would hold a control
		// character or pass 64 KiB.
		var want []string
		for _, v := range values {
			body := serve(t, h, withPlaceholder(ph), origin(200, map[string]string{"Content-Type": "text/plain"}, []byte(v), 7)).Body.String()
			if invalidFieldByte(body) < 0 && len(body) <= maxHeaderValue {
				want = append(want, body)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("values %q became %q, want %q", values, got, want)
		}
		for i := range got {
			if got[i] != want[i] && got[i] != strings.Trim(want[i], " \t") {
				t.Fatalf("values %q became %q, want %q", values, got, want)
			}
		}
	})
}

// TestHeadersOverBudgetDeterministic: which values the 1 MiB budget
// reaches follows the configured names, then the keys matching a name in
// sorted order, then the values: identical responses, and HEAD and GET,
// get the same fields, not Go's random map order.
func TestHeadersOverBudgetDeterministic(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: "a", Replace: "b"}}, Headers: []string{"Set-Cookie", "Link", "Location", "Refresh"}})
	big := "a" + strings.Repeat("x", 60<<10) // about 120 KiB of budget each
	in := http.Header{
		"Location":   {big},
		"Refresh":    {big},
		"Link":       {big, big},
		"Set-Cookie": {big, big, big},
		"set-cookie": {big},
		"SET-COOKIE": {big, big},
	}
	var first http.Header
	for i := range 20 {
		method := "GET"
		if i%2 == 1 {
			method = "HEAD"
		}
		got := serve(t, h, request(method, "/"), headerOrigin(302, in, "")).Header()
		if i == 0 {
			first = got
			// Set-Cookie's keys sorted: SET-COOKIE's 2, Set-Cookie's 3,
			// set-cookie's 1 (the 8th value passes the budget).
			if n := len(got["SET-COOKIE"]) + len(got["Set-Cookie"]) + len(got["set-cookie"]) + len(got["Link"]); n != 8 ||
				len(got["SET-COOKIE"]) != 2 || len(got["Link"]) != 2 || got["Location"] != nil || got["Refresh"] != nil {
				t.Fatalf("fields sent: %d SET-COOKIE, %d Set-Cookie, %d set-cookie, %d Link, %d Location, %d Refresh; want the configured order",
					len(got["SET-COOKIE"]), len(got["Set-Cookie"]), len(got["set-cookie"]), len(got["Link"]), len(got["Location"]), len(got["Refresh"]))
			}
			continue
		}
		if !maps.EqualFunc(got, first, slices.Equal) {
			t.Fatalf("response %d (%s) differs from the first", i, method)
		}
	}
}

// TestHeadersRewrittenValueTrimmed: a rewritten value is sent without
// leading or trailing SP and HTAB (RFC 9110 §5.5, RFC 9113 §8.2.1), which a
// replacement or a caller's placeholder could put there.
func TestHeadersRewrittenValueTrimmed(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{
		{Find: "^tail", Regex: true, Replace: "{ph}"},
		{Find: "end$", Regex: true, Replace: "trail "},
	}, Headers: []string{"Location", "Link"}})
	for _, ph := range []string{"\t", " \t ", "\t x"} {
		r := request("GET", "/")
		r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("ph", ph)
		rec := serve(t, h, r, headerOrigin(302, http.Header{"Location": {"tail/mid/end"}, "Link": {"tail"}}, ""))
		if got, want := rec.Header().Get("Location"), strings.TrimLeft(ph, " \t")+"/mid/trail"; got != want {
			t.Errorf("%q: Location %q, want %q", ph, got, want)
		}
		if got, want := rec.Header()["Link"], []string{strings.Trim(ph, " \t")}; !slices.Equal(got, want) {
			t.Errorf("%q: Link %q, want %q", ph, got, want)
		}
	}
}

// TestHeadersMetricsMatchFates: header_fields_total counts each value of a
// named field once, by what became of it, as docs/substitute.md says:
// rewritten when sent rewritten, invalid, too_long or over_budget when
// removed; a value no rule matched and sent as it came is not counted.
func TestHeadersMetricsMatchFates(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{
		{Find: "QRY", Replace: "{q}"},
		{Find: "origin.example", Replace: "clone.test"},
	}, Headers: []string{"Location", "Link", "Refresh", "Set-Cookie", "Content-Location"}})
	counters := []prometheus.Counter{metrics.headerRewritten, metrics.headerInvalid, metrics.headerTooLong, metrics.headerOverBudget}
	names := []string{"rewritten", "invalid", "too_long", "over_budget"}
	cases := []struct {
		name string
		in   http.Header
		want [4]int // rewritten, invalid, too_long, over_budget
	}{
		{"no rule matches", http.Header{"Location": {"/a"}, "Link": {"</b>", "</c>"}}, [4]int{}},
		{"mixed", http.Header{
			"Location":   {"/nothing"},                                 // not counted
			"Link":       {"<https://origin.example/>", "</x>"},        // rewritten, not counted
			"Refresh":    {"0; url=https://origin.example/?QRY"},       // invalid
			"Set-Cookie": {strings.Repeat("x", maxHeaderValue+1), "a"}, // too_long though no rule matches, not counted
		}, [4]int{1, 1, 1, 0}},
		// Location, named first, is rewritten; then 16 values of 32 KiB
		// matching no rule, each 64 KiB read and written: the 16th passes
		// the budget, and Content-Location, named after Set-Cookie, is
		// reached after it.
		{"past the budget", http.Header{
			"Set-Cookie":       slices.Repeat([]string{strings.Repeat("x", 32<<10)}, 16),
			"Content-Location": {"/origin.example"},
			"Location":         {"/origin.example"},
			"Link":             {strings.Repeat("x", maxHeaderValue+1)}, // too_long wherever it comes
		}, [4]int{1, 0, 1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before [4]float64
			for i, m := range counters {
				before[i] = testutil.ToFloat64(m)
			}
			r := request("GET", "/")
			r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set("q", "\n")
			serve(t, h, r, headerOrigin(302, c.in, ""))
			for i, m := range counters {
				if n := testutil.ToFloat64(m) - before[i]; int(n) != c.want[i] {
					t.Errorf("header_fields_total{result=%q} grew by %v, want %d", names[i], n, c.want[i])
				}
			}
		})
	}
}

// TestHeadersMaxMatchBoundsValues: max_match bounds a match in a header
// value as in a body: one longer is not rewritten (the value is sent as
// it came, no rule having matched) and counts in dropped_candidates_total.
func TestHeadersMaxMatchBoundsValues(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: `a[^;]*b`, Regex: true, Replace: "z"}}, MaxMatch: 64, Headers: []string{"Location"}})
	for _, c := range []struct{ in, want string }{
		{"/a" + strings.Repeat("x", 40) + "b", "/z"},
		// Past max_match: the rule could not be applied, so the value is
		// removed (a caller whose path the upstream echoes could stretch
		// it there), counted as too_long.
		{"/a" + strings.Repeat("x", 100) + "b", ""},
	} {
		before, beforeLong := testutil.ToFloat64(metrics.dropped), testutil.ToFloat64(metrics.headerTooLong)
		rec := serve(t, h, request("GET", "/"), headerOrigin(302, http.Header{"Location": {c.in}}, ""))
		if got, ok := rec.Header()["Location"]; strings.Join(got, "") != c.want || ok != (c.want != "") {
			t.Errorf("Location %.50q, want %.50q", got, c.want)
		}
		dropped := testutil.ToFloat64(metrics.dropped) - before
		long := testutil.ToFloat64(metrics.headerTooLong) - beforeLong
		if (dropped > 0) != (c.want == "") || long != dropped {
			t.Errorf("%d-byte value: dropped_candidates_total grew by %v, header_fields_total{too_long} by %v", len(c.in), dropped, long)
		}
	}
}
