package dictionary

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// provision returns h provisioned and validated, or fails the test.
func provision(t testing.TB, h *Handler) *Handler {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Cleanup() })
	return h
}

// browserRequest is a same-origin script fetch as Chromium sends it.
func browserRequest(host, path string, header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://"+host+path, nil)
	r.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd, dcb, dcz")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	r.Header.Set("Sec-Fetch-Mode", "no-cors")
	r.Header.Set("Sec-Fetch-Dest", "script")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			r.Header.Del(header[i])
		} else {
			r.Header.Set(header[i], header[i+1])
		}
	}
	// Caddy's server puts the request as received in the context.
	return r.WithContext(context.WithValue(r.Context(), caddyhttp.OriginalRequestCtxKey, *r))
}

// file answers body with the given headers (pairs), as a static origin does.
func file(body []byte, header ...string) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Etag", fmt.Sprintf(`"%x"`, sha256.Sum256(body)))
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		if inm := r.Header.Get("If-None-Match"); inm != "" && inm == w.Header().Get("Etag") {
			w.WriteHeader(http.StatusNotModified)
			return nil
		}
		_, err := w.Write(body)
		return err
	})
}

// serveContent answers body as file_server does (http.ServeContent:
// ranges, conditionals, ETag).
func serveContent(body []byte) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Etag", fmt.Sprintf(`"%x"`, sha256.Sum256(body)))
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
		return nil
	})
}

func serve(t testing.TB, h *Handler, r *http.Request, next caddyhttp.Handler) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	if err := h.ServeHTTP(rec, r, next); err != nil {
		t.Fatal(err)
	}
	return rec.Result()
}

func readBody(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func counter(c prometheus.Counter) float64 { return testutil.ToFloat64(c) }

func appHandler(t testing.TB) *Handler {
	return provision(t, &Handler{Match: "/assets/app.*.js", MatchDest: []string{"script"}})
}

func TestMarkThenDelta(t *testing.T) {
	h := appHandler(t)
	v1, v2 := sampleVersions(t)
	resp := serve(t, h, browserRequest("a.test", "/assets/app.1.js"), file(v1))
	if got, want := resp.Header.Get("Use-As-Dictionary"), `match="/assets/app.*.js", match-dest=("script")`; got != want {
		t.Fatalf("Use-As-Dictionary = %q, want %q", got, want)
	}
	if !bytes.Equal(readBody(t, resp), v1) {
		t.Fatal("the marked response's body changed")
	}
	if n, _ := h.store.stats(); n != 1 {
		t.Fatalf("store holds %d dictionaries, want 1", n)
	}
	hash := sha256.Sum256(v1)
	for _, coding := range []string{codingDCZ, codingDCB} {
		hits := counter(metrics.hitBy[coding])
		req := browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", formatAvailableDictionary(hash),
			"Accept-Encoding", "gzip, br, "+coding)
		resp = serve(t, h, req, file(v2))
		if ce := resp.Header.Get("Content-Encoding"); ce != coding {
			t.Fatalf("Content-Encoding = %q, want %s", ce, coding)
		}
		if vary := strings.Join(resp.Header.Values("Vary"), ", "); !strings.Contains(vary, "Accept-Encoding") || !strings.Contains(vary, "Available-Dictionary") {
			t.Fatalf("Vary = %q, want Accept-Encoding and Available-Dictionary", vary)
		}
		if etag, want := resp.Header.Get("Etag"), fmt.Sprintf(`-%s-%x"`, coding, hash[:6]); !strings.HasSuffix(etag, want) {
			t.Errorf("ETag %s does not name the coding and the dictionary (%s)", etag, want)
		}
		if resp.Header.Get("Content-Length") != "" {
			t.Error("Content-Length of the identity body kept")
		}
		body := readBody(t, resp)
		got, err := decodeDelta(coding, v1, body)
		if err != nil || !bytes.Equal(got, v2) {
			t.Fatalf("%s body does not decode to version 2: %v", coding, err)
		}
		if len(body) > len(v2)/5 {
			t.Errorf("%s: %d bytes for %d", coding, len(body), len(v2))
		}
		if counter(metrics.hitBy[coding]) != hits+1 {
			t.Errorf("%s hit not counted", coding)
		}
		// Version 2 is marked too: the next deploy is compressed against it.
		if resp.Header.Get("Use-As-Dictionary") == "" {
			t.Error("the dictionary-compressed response is not marked")
		}
	}
	if n, _ := h.store.stats(); n != 2 {
		t.Fatalf("store holds %d dictionaries, want 2 (both versions)", n)
	}
}

// missCase sends version 2 with a dictionary and checks it is not
// dictionary-compressed, and which miss is counted.
func missCase(t *testing.T, h *Handler, reason string, req *http.Request, next caddyhttp.Handler) *http.Response {
	t.Helper()
	before := counter(metrics.missBy[reason])
	resp := serve(t, h, req, next)
	if ce := resp.Header.Get("Content-Encoding"); ce == codingDCZ || ce == codingDCB {
		t.Fatalf("%s: got Content-Encoding %s", reason, ce)
	}
	if got := counter(metrics.missBy[reason]); got != before+1 {
		t.Errorf("misses_total{reason=%q} went from %v to %v, want +1", reason, before, got)
	}
	return resp
}

func TestMisses(t *testing.T) {
	h := appHandler(t)
	v1, v2 := sampleVersions(t)
	serve(t, h, browserRequest("a.test", "/assets/app.1.js"), file(v1))
	avail := formatAvailableDictionary(sha256.Sum256(v1))

	// Another host never gets a delta against a.test's dictionary.
	resp := missCase(t, h, missUnknown, browserRequest("b.test", "/assets/app.2.js", "Available-Dictionary", avail), file(v2))
	if !bytes.Equal(readBody(t, resp), v2) {
		t.Fatal("other host: body changed")
	}
	// Same host over https is another origin.
	r := browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail)
	r.TLS = new(tls.ConnectionState)
	missCase(t, h, missUnknown, r, file(v2))
	missCase(t, h, missUnknown, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", formatAvailableDictionary(sha256.Sum256(v2[:100]))), file(v2))
	missCase(t, h, missMalformed, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", "abc"), file(v2))
	missCase(t, h, missEncoding, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail, "Accept-Encoding", "gzip, br, dcz;q=0"), file(v2))
	missCase(t, h, missMismatch, browserRequest("a.test", "/other/app.2.js", "Available-Dictionary", avail), file(v2))
	missCase(t, h, missMismatch, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail, "Sec-Fetch-Dest", "style"), file(v2))
	// Cross-origin no-cors: the response is opaque to the page.
	missCase(t, h, missCrossOrigin, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail, "Sec-Fetch-Site", "cross-site"), file(v2))
	// Cross-origin CORS without Access-Control-Allow-Origin.
	missCase(t, h, missCrossOrigin, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Origin", "https://evil.test"), file(v2))
	// Not eligible: error status, a body already encoded, no-transform, POST.
	missCase(t, h, missIneligible, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail), caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusNotFound)
		_, err := w.Write(v2)
		return err
	}))
	missCase(t, h, missIneligible, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail), file(v2, "Content-Encoding", "gzip"))
	missCase(t, h, missIneligible, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail), file(v2, "Cache-Control", "no-transform"))
	// A range (http.ServeContent, as file_server answers it): 206, never a delta.
	resp = missCase(t, h, missIneligible, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail, "Range", "bytes=0-99"), serveContent(v2))
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(readBody(t, resp), v2[:100]) {
		t.Fatalf("range: status %d, want 206 with the first 100 bytes", resp.StatusCode)
	}
	post := browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail)
	post.Method = http.MethodPost
	missCase(t, h, missIneligible, post, file(v2))

	// Credentialed CORS (the request carries cookies): * does not let the
	// page read the response, nor the origin without
	// Access-Control-Allow-Credentials: true.
	missCase(t, h, missCrossOrigin, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Origin", "https://app.test", "Cookie", "s=1"),
		file(v2, "Access-Control-Allow-Origin", "*"))
	missCase(t, h, missCrossOrigin, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Origin", "https://app.test", "Cookie", "s=1"),
		file(v2, "Access-Control-Allow-Origin", "https://app.test"))
	resp = serve(t, h, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Origin", "https://app.test", "Cookie", "s=1"),
		file(v2, "Access-Control-Allow-Origin", "https://app.test", "Access-Control-Allow-Credentials", "true"))
	if resp.Header.Get("Content-Encoding") != codingDCZ {
		t.Fatal("readable credentialed CORS response not compressed against the dictionary")
	}

	// CORS with Access-Control-Allow-Origin matching: readable, so compressed.
	resp = serve(t, h, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Origin", "https://app.test"),
		file(v2, "Access-Control-Allow-Origin", "https://app.test"))
	if resp.Header.Get("Content-Encoding") != codingDCZ {
		t.Fatal("readable CORS response not compressed against the dictionary")
	}
}

func TestMarkingRules(t *testing.T) {
	v1, _ := sampleVersions(t)
	for _, tc := range []struct {
		name   string
		req    *http.Request
		next   caddyhttp.Handler
		marked bool
	}{
		{"plain", browserRequest("a.test", "/assets/app.1.js"), file(v1), true},
		{"other path", browserRequest("a.test", "/assets/vendor.js"), file(v1), false},
		{"no-store", browserRequest("a.test", "/assets/app.1.js"), file(v1, "Cache-Control", "public, no-store"), false},
		{"Set-Cookie", browserRequest("a.test", "/assets/app.1.js"), file(v1, "Set-Cookie", "s=1"), false},
		{"private", browserRequest("a.test", "/assets/app.1.js"), file(v1, "Cache-Control", "max-age=60, Private"), false},
		{"Vary: Cookie", browserRequest("a.test", "/assets/app.1.js"), file(v1, "Vary", "Accept-Encoding, cookie"), false},
		{"Vary: *", browserRequest("a.test", "/assets/app.1.js"), file(v1, "Vary", "*"), false},
		{"Vary: Origin", browserRequest("a.test", "/assets/app.1.js"), file(v1, "Vary", "Origin"), true},
		{"already encoded", browserRequest("a.test", "/assets/app.1.js"), file(v1, "Content-Encoding", "br"), false},
		{"too large", browserRequest("a.test", "/assets/app.1.js"), file(v1, "Content-Length", strconv.Itoa(DefaultMaxSize+1)), false},
		{"cross-site no-cors", browserRequest("a.test", "/assets/app.1.js", "Sec-Fetch-Site", "cross-site"), file(v1), false},
		{"same-site no-cors", browserRequest("a.test", "/assets/app.1.js", "Sec-Fetch-Site", "same-site"), file(v1), false},
		{"Authorization", browserRequest("a.test", "/assets/app.1.js", "Authorization", "Bearer x"), file(v1), false},
		{"range", browserRequest("a.test", "/assets/app.1.js", "Range", "bytes=0-99"), serveContent(v1), false},
		{"tiny", browserRequest("a.test", "/assets/app.1.js"), file([]byte("x"), "Content-Length", "1"), false},
		{"cross-site cors allowed", browserRequest("a.test", "/assets/app.1.js", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Origin", "https://x.test"), file(v1, "Access-Control-Allow-Origin", "*"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := appHandler(t)
			resp := serve(t, h, tc.req, tc.next)
			marked := resp.Header.Get("Use-As-Dictionary") != ""
			n, _ := h.store.stats()
			if marked != tc.marked || (n == 1) != tc.marked {
				t.Fatalf("marked %v, stored %d; want marked and stored: %v", marked, n, tc.marked)
			}
		})
	}
}

// TestUnknownLengthOverMaxSize: a body of unknown length that turns out
// larger than max_size is marked (the header left first) but not stored,
// and its capture is given back to the budget.
func TestUnknownLengthOverMaxSize(t *testing.T) {
	h := provision(t, &Handler{Match: "/a*", MaxSize: 1 << 10, StoreSize: 1 << 20})
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<7) // 2 KiB
	// The budget comes back as soon as the body passes max_size, not when
	// it ends (a stream, or a slow client, would hold it).
	var during int64
	resp := serve(t, h, browserRequest("a.test", "/a"), caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if _, err := w.Write(big); err != nil {
			return err
		}
		during = h.store.captureBudget.Load()
		return nil
	}))
	if during != 1<<20 {
		t.Errorf("capture budget %d while the over-long body is still being sent, want all of it back (%d)", during, 1<<20)
	}
	if !bytes.Equal(readBody(t, resp), big) {
		t.Fatal("body changed")
	}
	if n, _ := h.store.stats(); n != 0 {
		t.Fatalf("stored a %d-byte body over max_size", len(big))
	}
	if left := h.store.captureBudget.Load(); left != 1<<20 {
		t.Fatalf("capture budget %d after the response, want all of it back (%d)", left, 1<<20)
	}
}

func TestDeltaCache(t *testing.T) {
	h := appHandler(t)
	v1, v2 := sampleVersions(t)
	serve(t, h, browserRequest("a.test", "/assets/app.1.js"), file(v1))
	avail := formatAvailableDictionary(sha256.Sum256(v1))
	first := readBody(t, serve(t, h, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail), file(v2)))
	hits := counter(metrics.deltaHits)
	resp := serve(t, h, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail), file(v2))
	second := readBody(t, resp)
	if counter(metrics.deltaHits) != hits+1 {
		t.Fatal("second identical request not served from the delta cache")
	}
	if !bytes.Equal(first, second) || resp.Header.Get("Content-Encoding") != codingDCZ {
		t.Fatal("delta cache served other bytes")
	}
	if resp.Header.Get("Content-Length") != strconv.Itoa(len(second)) {
		t.Errorf("Content-Length %q, want %d", resp.Header.Get("Content-Length"), len(second))
	}
	// Another ETag (another version at the same URL) is compressed anew.
	v3 := append(bytes.Clone(v2), "/*v3*/"...)
	got, err := decodeDelta(codingDCZ, v1, readBody(t, serve(t, h, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail), file(v3))))
	if err != nil || !bytes.Equal(got, v3) {
		t.Fatal("new ETag got the cached delta of the old one")
	}
}

// TestNotModified: a conditional request naming the coded ETag reaches the
// origin with its own ETag, and the 304 carries the coded one and Vary.
func TestNotModified(t *testing.T) {
	h := appHandler(t)
	v1, v2 := sampleVersions(t)
	serve(t, h, browserRequest("a.test", "/assets/app.1.js"), file(v1))
	avail := formatAvailableDictionary(sha256.Sum256(v1))
	resp := serve(t, h, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail), file(v2))
	etag := resp.Header.Get("Etag")
	resp = serve(t, h, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail, "If-None-Match", etag), file(v2))
	if resp.StatusCode != http.StatusNotModified || resp.Header.Get("Etag") != etag {
		t.Fatalf("status %d, ETag %s; want 304 with %s", resp.StatusCode, resp.Header.Get("Etag"), etag)
	}
	if vary := strings.Join(resp.Header.Values("Vary"), ", "); !strings.Contains(vary, "Available-Dictionary") {
		t.Errorf("304 Vary = %q", vary)
	}
	// A request that would not get that representation (no dictionary, or
	// another one: a cache revalidating its stored dcz variant for another
	// client, RFC 9111 §4.3.1) must not get a 304 for it: the 304 would make
	// the cache serve bytes compressed against a dictionary the client may
	// not have. It gets the response it asked for, in full.
	v1b := append(bytes.Clone(v1), "/*another dictionary*/"...)
	serve(t, h, browserRequest("a.test", "/assets/app.1b.js"), file(v1b))
	for _, tc := range []struct {
		name, avail, coding string
		dict                []byte
	}{
		{"no Available-Dictionary", "", "", nil},
		{"an unknown dictionary", formatAvailableDictionary(sha256.Sum256([]byte("gone"))), "", nil},
		{"another stored dictionary", formatAvailableDictionary(sha256.Sum256(v1b)), codingDCZ, v1b},
		{"the same dictionary in dcb", avail, codingDCB, v1},
	} {
		resp = serve(t, h, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", tc.avail, "If-None-Match", etag,
			"Accept-Encoding", "gzip, br, "+tc.coding), file(v2))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Etag") == etag {
			t.Fatalf("%s: status %d, ETag %s; want 200 with another ETag than %s", tc.name, resp.StatusCode, resp.Header.Get("Etag"), etag)
		}
		body := readBody(t, resp)
		if tc.coding != "" {
			var err error
			if body, err = decodeDelta(tc.coding, tc.dict, body); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if !bytes.Equal(body, v2) {
			t.Fatalf("%s: body is not version 2", tc.name)
		}
	}
}

// TestConcurrentDeltas compresses against one dictionary from many
// goroutines (with -race: pooled encoders are never shared).
func TestConcurrentDeltas(t *testing.T) {
	h := provision(t, &Handler{Match: "/assets/app.*.js", DeltaCacheSize: DeltaCacheOff})
	v1, v2 := sampleVersions(t)
	serve(t, h, browserRequest("a.test", "/assets/app.1.js"), file(v1))
	avail := formatAvailableDictionary(sha256.Sum256(v1))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			coding := []string{codingDCZ, codingDCB}[i%2]
			body := append(bytes.Clone(v2), fmt.Sprintf("/*%d*/", i)...)
			rec := httptest.NewRecorder()
			if err := h.ServeHTTP(rec, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail, "Accept-Encoding", coding), file(body)); err != nil {
				errs <- err
				return
			}
			got, err := decodeDelta(coding, v1, rec.Body.Bytes())
			if err != nil || !bytes.Equal(got, body) {
				errs <- fmt.Errorf("goroutine %d %s: %v", i, coding, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestStoreFloodBounded floods the store with distinct dictionaries (as an
// origin with ever-changing bodies would) and checks that the bytes it
// counts, and the bytes it holds, stay within store_size.
func TestStoreFloodBounded(t *testing.T) {
	const storeSize = 4 << 20
	h := provision(t, &Handler{Match: "/a/*", MaxSize: 64 << 10, StoreSize: storeSize})
	body := make([]byte, 48<<10)
	for i := range 500 {
		copy(body, fmt.Sprintf("version %d", i))
		serve(t, h, browserRequest("a.test", fmt.Sprintf("/a/%d.js", i)), file(body))
		n, size := h.store.stats()
		if size > storeSize {
			t.Fatalf("after %d dictionaries the store counts %d bytes, over %d", i+1, size, storeSize)
		}
		var held int64
		h.store.dicts.mu.Lock()
		for _, e := range h.store.dicts.items {
			held += int64(cap(e.Value.(*lruEntry[dictKey, *dict]).val.data))
		}
		h.store.dicts.mu.Unlock()
		if held > storeSize {
			t.Fatalf("the store holds %d bytes of dictionaries in %d entries, over %d", held, n, storeSize)
		}
	}
	// Each 48 KiB dictionary counts ~530 KiB with its Brotli tables.
	if n, _ := h.store.stats(); n < 6 {
		t.Fatalf("only %d dictionaries kept of 500: eviction too eager", n)
	}
}

// TestStoreKeptAcrossReload: a reload provisions the new config's handlers
// before it cleans up the old ones; handlers configured alike share the
// store, so the dictionaries survive, and the store goes with the last one.
// A handler configured otherwise has a store of its own.
func TestStoreKeptAcrossReload(t *testing.T) {
	v1, v2 := sampleVersions(t)
	avail := formatAvailableDictionary(sha256.Sum256(v1))
	old := provision(t, &Handler{Match: "/reload/*"})
	serve(t, old, browserRequest("a.test", "/reload/1.js"), file(v1))

	cur := provision(t, &Handler{Match: "/reload/*"})
	other := provision(t, &Handler{Match: "/reload/*", StoreSize: 2 * DefaultStoreSize})
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if resp := serve(t, cur, browserRequest("a.test", "/reload/2.js", "Available-Dictionary", avail), file(v2)); resp.Header.Get("Content-Encoding") != codingDCZ {
		t.Fatalf("after the reload: Content-Encoding %q, want dcz", resp.Header.Get("Content-Encoding"))
	}
	if resp := serve(t, other, browserRequest("a.test", "/reload/2.js", "Available-Dictionary", avail), file(v2)); resp.Header.Get("Content-Encoding") != "" {
		t.Fatal("a handler with another store_size used the dictionary of another store")
	}
	key := cur.storeKey
	if err := cur.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, ok := stores.References(key); ok {
		t.Fatal("the store outlived the last handler using it")
	}
}

// TestDeltaCacheNotShared: a response that varies on something the delta
// cache key does not hold (a cookie, credentials) under one strong ETag is
// never served from the delta cache to another client: each decodes to
// its own body. The control case (nothing to vary on) is served from it.
func TestDeltaCacheNotShared(t *testing.T) {
	v1, v2 := sampleVersions(t)
	avail := formatAvailableDictionary(sha256.Sum256(v1))
	for _, tc := range []struct {
		name   string
		header []string // response fields
		req    []string // request fields, the user's differ
		shared bool     // the second user may get the first user's delta
	}{
		{"nothing to vary on", nil, nil, true},
		{"Vary: Cookie", []string{"Vary", "Accept-Encoding, Cookie"}, []string{"Cookie", "user="}, false},
		{"Vary: *", []string{"Vary", "*"}, nil, false},
		{"Set-Cookie", []string{"Set-Cookie", "s=1"}, nil, false},
		{"private", []string{"Cache-Control", "private, max-age=60"}, nil, false},
		{"no-store", []string{"Cache-Control", "no-store"}, nil, false},
		{"Authorization", nil, []string{"Authorization", "Bearer "}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := appHandler(t)
			serve(t, h, browserRequest("a.test", "/assets/app.1.js"), file(v1))
			for i, user := range []string{"alice", "bob"} {
				body := append(bytes.Clone(v2), "/*"+user+"*/"...)
				hdr := append([]string{"Etag", `"same-for-everyone"`}, tc.header...)
				reqHdr := []string{"Available-Dictionary", avail}
				if tc.req != nil {
					reqHdr = append(reqHdr, tc.req[0], tc.req[1]+user)
				}
				hits := counter(metrics.deltaHits)
				resp := serve(t, h, browserRequest("a.test", "/assets/app.2.js", reqHdr...), file(body, hdr...))
				if resp.Header.Get("Content-Encoding") != codingDCZ {
					t.Fatalf("%s: Content-Encoding %q, want dcz", user, resp.Header.Get("Content-Encoding"))
				}
				got, err := decodeDelta(codingDCZ, v1, readBody(t, resp))
				if err != nil {
					t.Fatal(err)
				}
				hit := counter(metrics.deltaHits) > hits
				if i == 1 && tc.shared {
					if !hit {
						t.Fatal("second identical request not served from the delta cache")
					}
					continue
				}
				if hit || !bytes.Equal(got, body) {
					t.Fatalf("%s got another response's delta (from the delta cache: %v)", user, hit)
				}
			}
		})
	}
}

// TestEncodersBounded: responses held open by slow clients each keep an
// encoder of several MiB; past max_encoders, further requests go without
// the dictionary (miss reason busy) instead of preparing more, and the
// slots come back when the responses end.
func TestEncodersBounded(t *testing.T) {
	h := provision(t, &Handler{Match: "/assets/app.*.js", MaxEncoders: 2, DeltaCacheSize: DeltaCacheOff})
	v1, v2 := sampleVersions(t)
	serve(t, h, browserRequest("a.test", "/assets/app.1.js"), file(v1))
	avail := formatAvailableDictionary(sha256.Sum256(v1))
	req := func() *http.Request {
		return browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail)
	}

	started, release := make(chan struct{}), make(chan struct{})
	slow := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Etag", `"v2"`)
		if _, err := w.Write(v2[:len(v2)/2]); err != nil {
			return err
		}
		started <- struct{}{}
		<-release
		_, err := w.Write(v2[len(v2)/2:])
		return err
	})
	var wg sync.WaitGroup
	recs := make([]*httptest.ResponseRecorder, 2)
	errs := make([]error, 2)
	for i := range recs {
		recs[i] = httptest.NewRecorder()
		wg.Go(func() { errs[i] = h.ServeHTTP(recs[i], req(), slow) })
		<-started
	}
	resp := missCase(t, h, missBusy, req(), file(v2))
	if !bytes.Equal(readBody(t, resp), v2) {
		t.Fatal("busy: body changed")
	}
	close(release)
	wg.Wait()
	for i, rec := range recs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got, err := decodeDelta(codingDCZ, v1, rec.Body.Bytes()); err != nil || !bytes.Equal(got, v2) {
			t.Fatalf("held response %d: %v", i, err)
		}
	}
	if resp := serve(t, h, req(), file(v2)); resp.Header.Get("Content-Encoding") != codingDCZ {
		t.Fatal("slots not given back when the responses ended")
	}
}

// failingWriter is a client connection that takes n bytes, then fails
// every write, as one past its write deadline does.
type failingWriter struct {
	*httptest.ResponseRecorder
	n int
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k, _ := w.ResponseRecorder.Write(p[:w.n])
		w.n = 0
		return k, errors.New("write deadline exceeded")
	}
	w.n -= len(p)
	return w.ResponseRecorder.Write(p)
}

// TestFailedWriteGivesBackSlot: once a write to the client fails (a client
// past encoder_write_idle, or gone), the response's encoder slot comes back
// at once, even while the handler below goes on writing (one that ignores
// write errors, or a slow upstream), and its later writes fail.
func TestFailedWriteGivesBackSlot(t *testing.T) {
	h := provision(t, &Handler{Match: "/assets/app.*.js", MaxEncoders: 1, DeltaCacheSize: DeltaCacheOff})
	v1, v2 := sampleVersions(t)
	serve(t, h, browserRequest("a.test", "/assets/app.1.js"), file(v1))
	req := browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", formatAvailableDictionary(sha256.Sum256(v1)))
	var held, afterFailure int
	var lateErr error
	stubborn := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Etag", `"v2"`)
		w.WriteHeader(http.StatusOK)
		held = len(h.encoderSlots)
		for i := 0; i < len(v2); i += 1024 {
			_, _ = w.Write(v2[i:min(i+1024, len(v2))])
			_ = http.NewResponseController(w).Flush()
		}
		afterFailure = len(h.encoderSlots)
		_, lateErr = w.Write([]byte("more"))
		return nil
	})
	rec := &failingWriter{ResponseRecorder: httptest.NewRecorder(), n: 100}
	if err := h.ServeHTTP(rec, req, stubborn); err != nil {
		t.Fatal(err)
	}
	if rec.Header().Get("Content-Encoding") != codingDCZ || held != 1 {
		t.Fatalf("Content-Encoding %q, %d slots held while compressing; want dcz and 1", rec.Header().Get("Content-Encoding"), held)
	}
	if afterFailure != 0 || lateErr == nil {
		t.Errorf("after the client write failed: %d slots held (want 0), a later write returned %v (want an error)", afterFailure, lateErr)
	}
}

// TestAbortGivesBack: reverse_proxy ends a response whose upstream (or
// client) fails mid-body by panicking with http.ErrAbortHandler. The
// encoder slot and the capture budget the response held come back, so cut
// streams cannot turn dictionary compression or marking off for good.
func TestAbortGivesBack(t *testing.T) {
	const storeSize = 1 << 20
	h := provision(t, &Handler{Match: "/assets/app.*.js", Encodings: []string{codingDCZ}, MaxEncoders: 1, MaxSize: 512 << 10, StoreSize: storeSize, DeltaCacheSize: DeltaCacheOff})
	v1, v2 := sampleVersions(t)
	serve(t, h, browserRequest("a.test", "/assets/app.1.js"), file(v1))
	avail := formatAvailableDictionary(sha256.Sum256(v1))
	cut := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Etag", `"v2"`) // no Content-Length: the capture reserves max_size
		_, _ = w.Write(v2[:len(v2)/2])
		panic(http.ErrAbortHandler)
	})
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Fatalf("recovered %v, want http.ErrAbortHandler", v)
			}
		}()
		_ = h.ServeHTTP(httptest.NewRecorder(), browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail), cut)
	}()
	if left := h.store.captureBudget.Load(); left != storeSize {
		t.Errorf("capture budget %d after the cut response, want all of it back (%d)", left, storeSize)
	}
	if n := len(h.encoderSlots); n != 0 {
		t.Errorf("%d encoder slots held after the cut response, want 0", n)
	}
	resp := serve(t, h, browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail), file(v2))
	if resp.Header.Get("Content-Encoding") != codingDCZ || resp.Header.Get("Use-As-Dictionary") == "" {
		t.Fatalf("after a cut response: Content-Encoding %q, Use-As-Dictionary %q; want dcz and marked",
			resp.Header.Get("Content-Encoding"), resp.Header.Get("Use-As-Dictionary"))
	}
}

// onlyReader hides bytes.Reader's WriteTo, so that io.Copy reaches the
// writer's ReadFrom (as file_server's does).
type onlyReader struct{ io.Reader }

// TestStreamingWriters: a handler below that writes through ReadFrom
// (io.Copy) and flushes through http.ResponseController reaches the
// encoder, not the connection beneath it: over a real loopback server,
// the client decodes the first half as soon as it is flushed, while the
// handler still holds the rest; the whole response decodes, and is stored.
func TestStreamingWriters(t *testing.T) {
	h := provision(t, &Handler{Match: "/assets/app.*.js", DeltaCacheSize: DeltaCacheOff})
	v1, v2 := sampleVersions(t)
	serve(t, h, browserRequest("a.test", "/assets/app.1.js"), file(v1))
	half := len(v2) / 2
	release := make(chan struct{})
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Etag", `"v2"`)
		if _, err := io.Copy(w, onlyReader{bytes.NewReader(v2[:half])}); err != nil {
			return err
		}
		if err := http.NewResponseController(w).Flush(); err != nil {
			return err
		}
		<-release
		_, err := io.Copy(w, onlyReader{bytes.NewReader(v2[half:])})
		return err
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Host = "a.test"
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.OriginalRequestCtxKey, *r))
		if err := h.ServeHTTP(w, r, next); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/assets/app.2.js", nil)
	req.Header.Set("Accept-Encoding", "dcz")
	req.Header.Set("Available-Dictionary", formatAvailableDictionary(sha256.Sum256(v1)))
	resp, err := srv.Client().Do(req)
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != codingDCZ {
		close(release)
		t.Fatalf("Content-Encoding %q, want dcz", resp.Header.Get("Content-Encoding"))
	}
	gotHalf, done := make(chan error, 1), make(chan error, 1)
	go func() {
		header := make([]byte, len(magicDCZ)+hashSize)
		if _, err := io.ReadFull(resp.Body, header); err != nil {
			gotHalf <- err
			return
		}
		dec, err := zstd.NewReader(resp.Body, zstd.WithDecoderDictRaw(0, v1), zstd.WithDecoderConcurrency(1))
		if err != nil {
			gotHalf <- err
			return
		}
		defer dec.Close()
		first := make([]byte, half)
		if _, err := io.ReadFull(dec, first); err != nil || !bytes.Equal(first, v2[:half]) {
			gotHalf <- fmt.Errorf("first half: %v", err)
			return
		}
		gotHalf <- nil
		rest, err := io.ReadAll(dec)
		if err == nil && !bytes.Equal(rest, v2[half:]) {
			err = errors.New("the second half differs")
		}
		done <- err
	}()
	select {
	case err := <-gotHalf:
		close(release)
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the flushed half did not reach the client")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the response did not end")
	}
	srv.Close() // waits for the handler to return
	if _, ok := h.store.lookup("http://a.test", sha256.Sum256(v2)); !ok {
		t.Fatal("the streamed body was not stored as a dictionary")
	}
}
