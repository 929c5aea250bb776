package edgebench

import (
	"bytes"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testchromium"
)

// reportFromRun measures a small real run against loopback servers: a
// probe of each class over h3, a refused 0-RTT and a short load mix.
func reportFromRun(t *testing.T) (*Report, []*Result, *LoadResult) {
	t.Helper()
	// It answers as a PoP with server_timing would, so the report has a
	// split to draw.
	pop := popHandler(`edge;dur=0.05, origin;dur=0.1, origin-conn;desc=reused`, "")
	srv := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(5 * time.Millisecond)
		}
		pop.ServeHTTP(w, r)
	}))
	report := &Report{Title: "edgebench report test"}
	var probes []*Result
	// Without 0-RTT under -race (see skipClient0RTTUnderRace); the run
	// without -race has it.
	classes, mix := []Class{ClassNew, ClassResumed, Class0RTT}, Mix{{ClassNew, 1}, {ClassResumed, 2}, {Class0RTT, 1}}
	if raceEnabled {
		classes, mix = classes[:2], mix[:2]
	}
	for _, class := range classes {
		res := classRun(t, srv.H3URL, H3, class, 8)
		probes = append(probes, res)
		report.AddResult("", res)
	}
	load, err := Load(t.Context(), LoadConfig{
		Config: Config{URL: srv.H3URL + "/slow", Proto: H3, Insecure: true, Timeout: 5 * time.Second, Mix: mix},
		Rate:   40, Duration: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	report.AddLoad("load mix", load)
	return report, probes, load
}

// The page is self-contained and carries the numbers of the results:
// every outcome's p99.9 as -json has it.
func TestReportHTML(t *testing.T) {
	report, probes, load := reportFromRun(t)
	var page bytes.Buffer
	if err := report.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	// Nothing to fetch when opened: no scripts, stylesheets, images, fonts
	// or frames by address.
	if m := regexp.MustCompile(`(?i)<(script|link|img|iframe|object|embed)\b|\bsrc=|url\(|@import`).FindString(html); m != "" {
		t.Errorf("the page would fetch something: %q", m)
	}
	if n := strings.Count(html, "<svg class=\"chart\""); n != 4 {
		t.Errorf("%d charts, want 4 (TTFB and total CDFs, responses and errors per second)", n)
	}
	if n := strings.Count(html, "<svg class=\"chart bar\""); n != 1 {
		t.Errorf("%d split charts, want 1", n)
	}
	for _, res := range probes {
		for name, o := range res.Outcomes {
			if o.Split == nil || o.Split.Responses != o.Count || !strings.Contains(html, "<td>"+formatMS(o.Split.LastMile.P50)+"</td>") {
				t.Errorf("%s %s: split %+v, its last mile not on the page", res.Config.Label(), name, o.Split)
			}
		}
	}
	for _, res := range probes {
		for _, o := range res.Outcomes {
			if !strings.Contains(html, "<td>"+formatMS(o.TTFB.P999)+"</td>") {
				t.Errorf("%s: p99.9 %s not on the page", res.Config.Label(), formatMS(o.TTFB.P999))
			}
		}
	}
	for name, o := range load.Outcomes {
		if !strings.Contains(html, "<td>"+formatMS(o.TTFB.P50)+"</td>") {
			t.Errorf("load %s: p50 %s not on the page", name, formatMS(o.TTFB.P50))
		}
	}
	if path := os.Getenv("EDGEKIT_REPORT_OUT"); path != "" {
		os.WriteFile(path, page.Bytes(), 0o644)
	}
}

// The page renders in headless Chromium with no console error, and the
// screenshot shows the plotted series in their colours.
func TestReportRendersInChromium(t *testing.T) {
	chromium := testchromium.Path(t)
	report, _, _ := reportFromRun(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := report.WriteHTML(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	shot := filepath.Join(dir, "report.png")
	cmd := exec.CommandContext(t.Context(), chromium, testchromium.Args(filepath.Join(dir, "profile"),
		"--hide-scrollbars", "--window-size=1000,2400", "--screenshot="+shot, "file://"+page)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("chromium did not finish in 60s:\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Uncaught") || strings.Contains(line, "net::ERR") {
			t.Errorf("chromium console: %s", line)
		}
	}
	if out := os.Getenv("EDGEKIT_REPORT_PNG"); out != "" {
		if b, err := os.ReadFile(shot); err == nil {
			os.WriteFile(out, b, 0o644)
		}
	}
	img, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, stderr.String())
	}
	defer img.Close()
	decoded, err := png.Decode(img)
	if err != nil {
		t.Fatal(err)
	}
	// The first three series colours must show: lines were drawn; and the
	// split's last mile (light cyan): its bars were drawn.
	want := map[[3]uint8]int{{0x00, 0x72, 0xB2}: 0, {0xD5, 0x5E, 0x00}: 0, {0x00, 0x9E, 0x73}: 0, {0x88, 0xCC, 0xEE}: 0}
	b := decoded.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := decoded.At(x, y).RGBA()
			key := [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}
			if _, ok := want[key]; ok {
				want[key]++
			}
		}
	}
	for c, n := range want {
		if n < 200 {
			t.Errorf("colour #%02X%02X%02X: %d pixels in the screenshot, want a plotted line (>= 200)", c[0], c[1], c[2], n)
		}
	}
}
