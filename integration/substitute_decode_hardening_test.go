package integration

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestSubstituteBrokenCompressedBodyAborts: issue 14 items 4 and 11. An
// origin sends a complete HTTP message whose compressed body is cut in half
// (framed by Content-Length, or by closing the connection), or is followed
// by trailing bytes. Through substitute, and through encode gzip after it,
// the client must see an error reading the body, never a clean end, over
// HTTP/1.1, HTTP/2 and HTTP/3.
func TestSubstituteBrokenCompressedBodyAborts(t *testing.T) {
	page := substitutePage()
	codings := []string{"gzip", "deflate", "br", "zstd"}
	bodies := map[string][]byte{}
	for _, c := range codings {
		bodies[c] = substituteEncode(t, c, page)
	}

	// /{framing}/{coding}: framing is cl (Content-Length of the half sent),
	// close (no length, the connection closes after the half), or trail
	// (the whole stream and trailing bytes, in two writes).
	origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if len(parts) != 2 || bodies[parts[1]] == nil {
			http.NotFound(w, r)
			return
		}
		framing, coding := parts[0], parts[1]
		full := bodies[coding]
		half := full[:len(full)/2]
		switch framing {
		case "cl":
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Content-Encoding", coding)
			w.Header().Set("Content-Length", strconv.Itoa(len(half)))
			_, _ = w.Write(half)
		case "close":
			conn, bufw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("origin: hijack: %v", err)
				return
			}
			defer conn.Close()
			fmt.Fprintf(bufw, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: %s\r\nConnection: close\r\n\r\n", coding)
			_, _ = bufw.Write(half)
			_ = bufw.Flush()
		case "trail":
			tail := []byte("\n<!-- trailing bytes -->\n")
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Content-Encoding", coding)
			w.Header().Set("Content-Length", strconv.Itoa(len(full)+len(tail)))
			_, _ = w.Write(full)
			http.NewResponseController(w).Flush()
			_, _ = w.Write(tail)
		default:
			http.NotFound(w, r)
		}
	}))

	handles := fmt.Sprintf(`
	handle /rp/* {
		uri strip_prefix /rp
		substitute {
			replace origin.example edge.example
		}
		reverse_proxy %[1]s
	}
	handle /gz/* {
		uri strip_prefix /gz
		encode gzip
		substitute {
			replace origin.example edge.example
		}
		reverse_proxy %[1]s
	}`, origin)
	c := StartCaddy(t, fmt.Sprintf(`
http://{$HOST}:{$HTTP_PORT} {%[1]s
}
https://localhost:{$HTTPS_PORT} {
	tls internal%[1]s
}
`, handles))
	c.WaitHTTPS(t)
	client := c.Client()

	// A complete response first, so that a failure below is the broken
	// body's and not the set-up's.
	resp, body := Get(t, client, c.URL("/rp/none/gzip"))
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("origin's 404 came back as %d: %q", resp.StatusCode, body)
	}

	cases := 0
	for _, proto := range []struct {
		name   string
		major  int
		client *http.Client
	}{{"HTTP/1.1", 1, client}, {"HTTP/2", 2, client}, {"HTTP/3", 3, c.H3Client()}} {
		for _, chain := range []string{"rp", "gz"} {
			for _, framing := range []string{"cl", "close", "trail"} {
				for _, coding := range codings {
					path := "/" + chain + "/" + framing + "/" + coding
					if framing == "trail" && coding != "gzip" && chain == "gz" {
						continue // one end-to-end trailing case per coding and chain is enough
					}
					url := c.URL(path)
					if proto.major > 1 {
						url = c.HTTPSURL(path)
					}
					cases++
					t.Run(proto.name+path, func(t *testing.T) {
						req, err := http.NewRequest(http.MethodGet, url, nil)
						if err != nil {
							t.Fatal(err)
						}
						req.Header.Set("Accept-Encoding", brotliBrowserAcceptEncoding) // as Chrome
						resp, err := proto.client.Do(req)
						if err != nil && proto.major == 3 {
							// HTTP/3 resets the stream with what is still
							// unsent, here the header too: no response at all.
							t.Logf("no response: %v", err)
							return
						}
						if err != nil {
							t.Fatalf("request: %v", err)
						}
						defer resp.Body.Close()
						if resp.StatusCode != http.StatusOK || resp.ProtoMajor != proto.major {
							t.Fatalf("got %s %d, want %s 200", resp.Proto, resp.StatusCode, proto.name)
						}
						wantEnc := ""
						if chain == "gz" {
							wantEnc = "gzip"
						}
						if got := resp.Header.Get("Content-Encoding"); got != wantEnc {
							t.Errorf("Content-Encoding %q, want %q", got, wantEnc)
						}
						got, err := io.ReadAll(resp.Body)
						if err == nil {
							t.Fatalf("the body (%d bytes, of a %d-byte page) ended cleanly; want an error reading it (aborted response)", len(got), len(page))
						}
						t.Logf("%d bytes, then %v", len(got), err)
					})
				}
			}
		}
	}
	// Each broken body is one decode error, counted once whichever way
	// the response ended.
	want := fmt.Sprintf("caddy_substitute_decode_errors_total %d\n", cases)
	if m := c.Metrics(); !strings.Contains(m, want) {
		t.Errorf("want %q in metrics:\n%s", want, grepLines(m, "caddy_substitute_decode"))
	}
}
