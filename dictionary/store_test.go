package dictionary

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"runtime"
	"testing"

	brrr "github.com/molecule-man/go-brrr"
)

// TestPreparedBrotliDictionaryCost checks that what the store counts for a
// dcb dictionary covers the heap go-brrr's prepared dictionary takes.
func TestPreparedBrotliDictionaryCost(t *testing.T) {
	old, _ := sampleVersions(t)
	data := bytes.Repeat(old, (4<<20)/len(old)+1)
	for _, n := range []int{1 << 10, 48 << 10, 200 << 10, 1 << 20, 4 << 20} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		pd, err := brrr.PrepareDictionary(data[:n])
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		runtime.KeepAlive(pd)
		if counted := dictCost(n, true) - dictCost(n, false); heap > counted {
			t.Errorf("%d-byte dictionary: prepared Brotli dictionary takes %d bytes, the store counts %d", n, heap, counted)
		} else {
			t.Logf("%d-byte dictionary: prepared %d bytes, counted %d", n, heap, counted)
		}
	}
}

// BenchmarkStoreFlood adds distinct 48 KiB dictionaries to a 4 MiB store
// (with dcb, so each is prepared for Brotli too) and reports the heap in
// use at the end: bounded by the store, whatever b.N.
func BenchmarkStoreFlood(b *testing.B) {
	const storeSize = 4 << 20
	s := newStore(storeSize)
	cfg := testEncoderConfig
	body := make([]byte, 48<<10)
	for i := 0; b.Loop(); i++ {
		copy(body, fmt.Sprintf("version %d", i))
		data := bytes.Clone(body)
		s.add("https://a.test", data, "/a/*", nil, resourceKey{}, cfg)
		if i%4 == 0 { // as dcb requests would: prepare the Brotli dictionary
			k := dictKey{"https://a.test", sha256.Sum256(data)}
			if d, ok := s.dicts.get(k); ok {
				enc, err := d.encoders.newBrotliEncoder()
				if err != nil {
					b.Fatal(err)
				}
				enc.Reset(io.Discard)
				if _, err := enc.Write(data[:1024]); err != nil {
					b.Fatal(err)
				}
				if err := enc.Close(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	n, size := s.stats()
	b.ReportMetric(float64(m.HeapAlloc)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(size)/(1<<20), "counted-MiB")
	b.ReportMetric(float64(n), "dictionaries")
	s.close()
}
