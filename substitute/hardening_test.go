package substitute

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// heapAfterGC is the live heap once garbage is collected.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoEntryCostIsFixed: a memo entry must not keep the request's path
// and query (which share memory with the whole request line) alive, so a
// caller's unique 16 KB queries cost what short ones cost.
func TestMemoEntryCostIsFixed(t *testing.T) {
	const n = 1000
	perEntry := func(query func(i int) string) float64 {
		h := provision(t, &Handler{Rules: []Rule{{Find: "origin", Replace: "edge"}}})
		hdr := map[string]string{"Content-Type": "text/html", "Etag": `"v1"`}
		next := origin(200, hdr, []byte("plain page"), 64)
		before := heapAfterGC()
		for i := range n {
			serve(t, h, request("GET", "/p?"+query(i)), next)
		}
		after := heapAfterGC()
		if got := h.memo.len(); got != n {
			t.Fatalf("memo holds %d entries, want %d", got, n)
		}
		runtime.KeepAlive(h)
		return (float64(after) - float64(before)) / n
	}
	small := perEntry(func(i int) string { return fmt.Sprintf("q=%d", i) })
	huge := perEntry(func(i int) string { return fmt.Sprintf("q=%d&pad=%s", i, strings.Repeat("x", 16<<10)) })
	t.Logf("retained per entry: %.0f B with short queries, %.0f B with 16 KiB ones", small, huge)
	if huge > small+512 || huge > 2048 {
		t.Errorf("a memo entry with a 16 KiB query retains %.0f B (short query: %.0f B): must not depend on the request", huge, small)
	}
}

// TestMaxMatchGrowsOnDemand: max_match bounds what a response may hold
// back; a response that holds little must not allocate it up front.
func TestMaxMatchGrowsOnDemand(t *testing.T) {
	h := provision(t, &Handler{MaxMatch: 16 << 20, Rules: []Rule{
		{Find: "origin", Replace: "edge"},
		{Find: `<a [^>]*>`, Regex: true, Replace: "<a>"},
	}})
	hdr := map[string]string{"Content-Type": "text/html"}
	next := origin(200, hdr, []byte("<p>origin page</p>"), 5)
	const n = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		// A new pool each time: a response of a fresh writer, as after a GC.
		h.writers = new(sync.Pool)
		if got := serve(t, h, request("GET", "/"), next).Body.String(); got != "<p>edge page</p>" {
			t.Fatalf("body %q", got)
		}
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("allocated per small response with max_match 16MiB: %d B", per)
	if per > 256<<10 {
		t.Errorf("a 18-byte response allocated %d B with max_match 16MiB: the held-bytes buffer must grow as needed", per)
	}

	// A match as long as max_match still works, fed in small pieces.
	long := "<a " + strings.Repeat("x", 16<<20-4) + ">"
	body := []byte("head " + long + " origin tail")
	big := origin(200, hdr, body, 4096)
	if got := serve(t, h, request("GET", "/"), big).Body.String(); got != "head <a> edge tail" {
		t.Errorf("a match of max_match bytes: got %d bytes starting %.40q", len(got), got)
	}
	// One byte longer cannot match: passed through untouched.
	longer := "<a " + strings.Repeat("x", 16<<20-3) + ">"
	if got := serve(t, h, request("GET", "/"), origin(200, hdr, []byte(longer), 4096)).Body.String(); got != longer {
		t.Errorf("a candidate longer than max_match: got %d bytes, want it untouched", len(got))
	}
}
