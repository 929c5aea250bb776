// Package testipsource is an IP-range source for tests only: the module
// http.ip_sources.edgekit_test_file returns the prefixes listed in a file,
// re-read whenever the file's modification time or size changes, so a test
// changes a running Caddy's trusted ranges by rewriting the file, without a
// reload. It is compiled only into the integration tests' Caddy
// (integration/internal/testcaddy), never into ./cmd/caddy.
//
// File format: one CIDR or IP per line; blank lines and lines starting with
// # are ignored. A file that cannot be read or parsed keeps the previous
// ranges, as caddyhttp.IPRangeSource asks of a source whose refresh fails.
package testipsource

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule((*FileSource)(nil))
}

// FileSource returns the prefixes listed in a file.
type FileSource struct {
	// Path of the file listing the prefixes.
	Path string `json:"path,omitempty"`

	mu      sync.Mutex
	stamp   stamp
	checked time.Time
	ranges  []netip.Prefix // replaced, never modified, on a change
}

// stamp identifies a version of the file.
type stamp struct {
	mtime time.Time
	size  int64
}

// CaddyModule returns the Caddy module information.
func (*FileSource) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.ip_sources.edgekit_test_file",
		New: func() caddy.Module { return new(FileSource) },
	}
}

// Provision reads the file once; a source whose ranges cannot be had fails
// to load, as the interface asks.
func (s *FileSource) Provision(caddy.Context) error {
	if s.Path == "" {
		return fmt.Errorf("edgekit_test_file: path is required")
	}
	return s.reload(true)
}

// recheck bounds how often the file is stat'ed: a test that rewrites it
// waits a little longer than this before expecting the change.
const recheck = 50 * time.Millisecond

// GetIPRanges returns the file's prefixes, re-reading the file when it
// changed. Between changes it returns the same slice, as real sources do.
func (s *FileSource) GetIPRanges(*http.Request) []netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); now.Sub(s.checked) >= recheck {
		s.checked = now
		_ = s.reload(false) // on failure keep the previous ranges
	}
	return s.ranges
}

// reload reads the file if it changed since the last read (or always, with
// force). The caller holds mu, or is Provision.
func (s *FileSource) reload(force bool) error {
	info, err := os.Stat(s.Path)
	if err != nil {
		return fmt.Errorf("edgekit_test_file: %w", err)
	}
	st := stamp{info.ModTime(), info.Size()}
	if !force && st == s.stamp {
		return nil
	}
	data, err := os.ReadFile(s.Path)
	if err != nil {
		return fmt.Errorf("edgekit_test_file: %w", err)
	}
	var ranges []netip.Prefix
	lines := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; lines.Scan(); n++ {
		line := bytes.TrimSpace(lines.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		p, err := caddyhttp.CIDRExpressionToPrefix(string(line))
		if err != nil {
			return fmt.Errorf("edgekit_test_file: %s:%d: %w", s.Path, n, err)
		}
		ranges = append(ranges, p)
	}
	s.stamp, s.ranges = st, ranges
	return nil
}

// UnmarshalCaddyfile reads
//
//	edgekit_test_file <path>
//	edgekit_test_file {
//	    path <path>
//	}
func (s *FileSource) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // module name
	if d.NextArg() {
		s.Path = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "path":
			if !d.AllArgs(&s.Path) {
				return d.ArgErr()
			}
		default:
			return d.Errf("edgekit_test_file: unknown option %q", d.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner       = (*FileSource)(nil)
	_ caddyfile.Unmarshaler   = (*FileSource)(nil)
	_ caddyhttp.IPRangeSource = (*FileSource)(nil)
)
