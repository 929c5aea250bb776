package substitute

import (
	"io"
	"net/http"
	"os"
	"slices"
	"testing"
)

// benchRules are the 10 rules (6 literal, 4 regex) of
// integration/bench-substitute.sh.
var benchRules = []Rule{
	{Find: "https://doc.rust-lang.org", Replace: "https://docs.example.org"},
	{Find: "<table>", Replace: `<table class="t">`},
	{Find: "https://llvm.org", Replace: "https://llvm.example.org"},
	{Find: "rustc", Replace: "RUSTC"},
	{Find: "legacyWidget", Replace: "widget"},
	{Find: "https://cdn.example.com/", Replace: "/static/"},
	{Find: `https?://github\.com/([\w-]+)`, Regex: true, Replace: "https://git.example.com/$1"},
	{Find: `\bwarning\b`, Regex: true, Replace: "WARN"},
	{Find: `\bv(\d+)\.(\d+)\.(\d+)\b`, Regex: true, Replace: "v$1.$2.x"},
	{Find: `campaign-[0-9a-f]{8}`, Regex: true, Replace: "campaign"},
}

// discardWriter is a client that costs nothing.
type discardWriter struct{ hdr http.Header }

func (d *discardWriter) Header() http.Header         { return d.hdr }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkHandler runs the ~1 MB HTML page through the handler in the
// 32 KiB chunks reverse_proxy writes, with the memo off (every body
// scanned) and on (same strong ETag: scanned for the matching rules only).
func BenchmarkHandler(b *testing.B) {
	page := benchPage(b)
	for _, memo := range []struct {
		name string
		memo int
	}{{"memo=off", MemoOff}, {"memo=on", 0}} {
		b.Run(memo.name, func(b *testing.B) {
			h := provision(b, &Handler{Rules: benchRules, Memo: memo.memo})
			benchServe(b, h, len(page), page, map[string]string{"Content-Type": "text/html; charset=utf-8", "Etag": `"v1"`})
		})
	}
}

// BenchmarkHandlerDecoding runs the same page through the handler sent
// compressed by the upstream, in 32 KiB writes: the cost of decoding on
// top of BenchmarkHandler, and the allocations per compressed response.
//
//	go test -run '^$' -bench BenchmarkHandlerDecoding -benchmem ./substitute/
func BenchmarkHandlerDecoding(b *testing.B) {
	page := benchPage(b)
	for _, enc := range []string{"gzip", "deflate", "br", "zstd"} {
		b.Run(enc, func(b *testing.B) {
			h := provision(b, &Handler{Rules: benchRules, Memo: MemoOff})
			benchServe(b, h, len(page), compress(b, enc, page), map[string]string{"Content-Type": "text/html; charset=utf-8", "Content-Encoding": enc})
		})
	}
}

func benchPage(b *testing.B) []byte {
	page, err := os.ReadFile("internal/engine/testdata/rustc-book.html")
	if err != nil {
		b.Skip("no benchmark page:", err)
	}
	return page
}

// benchServe answers body with the header hdr through h, in the 32 KiB
// writes reverse_proxy makes, once per iteration; size is the decoded
// size, for MB/s.
func benchServe(b *testing.B, h *Handler, size int, body []byte, hdr map[string]string) {
	next := asCaddy(origin(200, hdr, body, 32<<10))
	r := request("GET", "/page.html")
	w := &discardWriter{hdr: http.Header{}}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		clear(w.hdr)
		if err := h.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
	}
}

// siteRules are 190 rules an edge operator might carry for a whole site,
// none of which occurs on the benchmark pages (BenchmarkHandlerManyRules
// checks): old CDN hostnames, tracking scripts, legacy class names,
// renamed brands and contacts, product codes, regional shop URLs and
// tracking parameters. 144 literals and 46 regexes, so that with
// benchRules (6 literals, 4 regexes) the set is 150 literals and 50
// regexes, 3:1.
func siteRules() []Rule {
	var rules []Rule
	lit := func(find, replace string) { rules = append(rules, Rule{Find: find, Replace: replace}) }
	re := func(find, replace string) { rules = append(rules, Rule{Find: find, Regex: true, Replace: replace}) }

	// 40 old CDN hostnames.
	for _, d := range []string{"oldshop-cdn.net", "legacy-brand.example", "acme-static.example", "promo-assets.example", "store-eu.example"} {
		for _, sub := range []string{"static", "assets", "img", "media", "cdn", "files", "js", "css"} {
			lit("//"+sub+"."+d+"/", "//"+sub+".edge.example/")
		}
	}
	// 24 tracking scripts, cut out.
	for _, s := range []string{
		"https://www.googletagmanager.com/gtag/js", "https://www.google-analytics.com/analytics.js",
		"https://connect.facebook.net/en_US/fbevents.js", "https://static.hotjar.com/c/hotjar-",
		"https://script.crazyegg.com/pages/scripts/", "https://cdn.segment.com/analytics.js/v1/",
		"https://js.hs-scripts.com/", "https://snap.licdn.com/li.lms-analytics/insight.min.js",
		"https://bat.bing.com/bat.js", "https://s.yimg.com/wi/ytc.js",
		"https://analytics.tiktok.com/i18n/pixel/events.js", "https://cdn.mxpnl.com/libs/mixpanel-2-latest.min.js",
		"https://widget.intercom.io/widget/", "https://js.driftt.com/include/",
		"https://cdn.optimizely.com/js/", "https://cdn.heapanalytics.com/js/heap-",
		"https://static.ads-twitter.com/uwt.js", "https://sc-static.net/scevent.min.js",
		"https://cdn.amplitude.com/libs/amplitude-", "https://cdn.pendo.io/agent/static/",
		"https://www.clarity.ms/tag/", "https://cdn.cookielaw.org/scripttemplates/otSDKStub.js",
		"https://js.hsadspixel.net/fb.js", "https://s.pinimg.com/ct/core.js",
	} {
		lit(s, "/blocked.js")
	}
	// 30 legacy class names.
	for _, c := range []string{"btn", "nav", "card", "grid", "hero", "banner", "footer", "header", "modal", "tooltip"} {
		for _, v := range []string{"primary", "secondary", "wide"} {
			lit("legacy-"+c+"-"+v, c+" "+c+"--"+v)
		}
	}
	// 25 renamed brands and products.
	for _, b := range []string{"AcmeShop", "Acme Classic", "MegaStore Plus", "QuickCart", "ShopRight",
		"SuperSaver Club", "GoldCard Rewards", "FlexiPay", "HomeHub Mini", "HomeHub Pro",
		"SmartKettle 2", "AirPure 300", "AirPure 500", "TurboVac X", "TurboVac XL",
		"SoundBar One", "SoundBar Max", "KidsZone", "PetCorner", "GardenPlus",
		"FreshBox Weekly", "FreshBox Family", "EcoLine", "CityBike 7", "TrailBike 9"} {
		lit(b+"™", b+"®")
	}
	// 25 old addresses and contacts.
	for _, s := range []string{"support", "sales", "press", "jobs", "privacy"} {
		lit(s+"@oldshop.example", s+"@shop.example")
		lit("mailto:"+s+"@legacy-brand.example", "mailto:"+s+"@shop.example")
		lit("https://help.oldshop.example/"+s, "https://shop.example/help/"+s)
		lit("https://oldshop.example/"+s+"/", "https://shop.example/"+s+"/")
		lit("/pages/"+s+"-old.html", "/pages/"+s+".html")
	}
	// 20 product codes.
	for _, p := range []string{"sku", "SKU", "item", "prod", "mdl", "ean", "upc", "art-no", "ref-no", "cat-no"} {
		re(p+`-[0-9]{6}\b`, p+"-000000")
		re(`\b`+p+`:[A-Z]{2}[0-9]{4}\b`, p+":XX0000")
	}
	// 8 regional shops.
	for _, r := range []string{"us", "eu", "uk", "de", "fr", "jp", "au", "ca"} {
		re(`https?://(?:www\.)?shop-`+r+`\.example/([\w/-]+)`, "https://shop.example/"+r+"/$1")
	}
	// 8 tracking parameters, dropped.
	for _, p := range []string{"utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content", "fbclid", "gclid", "msclkid"} {
		re(`[?&]`+p+`=[\w.%-]*`, "")
	}
	// 10 more.
	re(`data-legacy-id="[0-9]+"`, "")
	re(`\bpromo-20[0-9]{2}\b`, "promo")
	re(`old-cdn[0-9]+\.example\.net`, "cdn.example.net")
	re(`\bOrder #[A-Z]{2}[0-9]{8}\b`, "Order")
	re(`\+1-800-[0-9]{3}-[0-9]{4}`, "+1-888-555-0100")
	re(`v[0-9]+\.legacy\.example`, "api.example")
	re(`/static/js/main\.[0-9a-f]{8}\.js`, "/static/js/main.js")
	re(`/static/css/main\.[0-9a-f]{8}\.css`, "/static/css/main.css")
	re(`ga\('create', 'UA-[0-9]+-[0-9]+'`, "ga('create', 'G-0'")
	re(`\bUA-[0-9]{6,9}-[0-9]{1,2}\b`, "G-0")
	return rules
}

// BenchmarkHandlerManyRules is BenchmarkHandler with 200 rules (150
// literals, 50 regexes), with the memo off and on, side by side:
//
//   - html-some: the HTML page with benchRules and siteRules (some of
//     benchRules match, none of siteRules): the memo scans for the
//     matching rules only;
//   - html-none: the HTML page with siteRules and 10 rules of the same
//     shapes as benchRules that do not occur on it: the memo streams the
//     body unscanned;
//   - js-none: the same for the ~1 MB React bundle, as
//     application/javascript.
//
// Each case reports how many rules matched the page (matched-rules).
//
//	go test -run '^$' -bench BenchmarkHandlerManyRules -count 6 ./substitute/
func BenchmarkHandlerManyRules(b *testing.B) {
	html := benchPage(b)
	js, err := os.ReadFile("internal/engine/testdata/react-dom.development.js")
	if err != nil {
		b.Skip("no benchmark page:", err)
	}
	site := siteRules()
	some := append(slices.Clone(benchRules), site...)
	none := append([]Rule{
		{Find: "https://doc.old-example.org", Replace: "https://docs.example.org"},
		{Find: "<table class=\"legacy\">", Replace: `<table class="t">`},
		{Find: "https://llvm.old-example.org", Replace: "https://llvm.example.org"},
		{Find: "OldProductName", Replace: "NewProductName"},
		{Find: "legacyWidget", Replace: "widget"},
		{Find: "https://cdn.example.com/", Replace: "/static/"},
		{Find: `https?://gitlab\.old-example\.com/([\w-]+)`, Regex: true, Replace: "https://git.example.com/$1"},
		{Find: `\bdeprecated-banner\b`, Regex: true, Replace: "banner"},
		{Find: `\bbuild-(\d+)\.(\d+)\.(\d+)-legacy\b`, Regex: true, Replace: "build-$1.$2.x"},
		{Find: `campaign-[0-9a-f]{8}`, Regex: true, Replace: "campaign"},
	}, site...)
	for _, c := range []struct {
		name  string
		rules []Rule
		page  []byte
		ctype string
		want  int // rules expected to match; -1: some
	}{
		{"html-some", some, html, "text/html; charset=utf-8", -1},
		{"html-none", none, html, "text/html; charset=utf-8", 0},
		{"js-none", none, js, "application/javascript", 0},
	} {
		if len(c.rules) != 200 {
			b.Fatalf("%s: %d rules, want 200", c.name, len(c.rules))
		}
		matched := matchedRules(b, c.rules, c.page)
		if c.want >= 0 && matched != c.want || c.want < 0 && matched == 0 {
			b.Fatalf("%s: %d of %d rules match the page", c.name, matched, len(c.rules))
		}
		b.Run(c.name, func(b *testing.B) {
			for _, memo := range []struct {
				name string
				memo int
			}{{"memo=off", MemoOff}, {"memo=on", 0}} {
				b.Run(memo.name, func(b *testing.B) {
					h := provision(b, &Handler{Rules: c.rules, Memo: memo.memo})
					benchServe(b, h, len(c.page), c.page, map[string]string{"Content-Type": c.ctype, "Etag": `"v1"`})
					b.ReportMetric(float64(matched), "matched-rules")
				})
			}
		})
	}
}

// matchedRules is how many of rules replace something in page.
func matchedRules(b *testing.B, rules []Rule, page []byte) int {
	h := provision(b, &Handler{Rules: rules, Memo: MemoOff})
	st := h.set.NewStream(io.Discard, nil)
	if _, err := st.Write(page); err != nil {
		b.Fatal(err)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	n := 0
	for i := range rules {
		if st.Matched().Has(i) {
			n++
		}
	}
	return n
}
