package substitute

import (
	"fmt"
	"runtime"
	"strings"
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
