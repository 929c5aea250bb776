package caddybrotli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	for input, wantJSON := range map[string]string{
		`br`:                                    `{}`,
		`br 0`:                                  `{"quality":0}`,
		`br 11`:                                 `{"quality":11}`,
		"br {\n\tquality 7\n\twindow 20\n}":     `{"quality":7,"window":20}`,
		"br 4 {\n\twindow 24\n}":                `{"quality":4,"window":24}`,
		"br {\n\twindow 10\n}":                  `{"window":10}`,
		"br {\n}":                               `{}`,
		"br {\n\tquality 0\n}":                  `{"quality":0}`,
		"br 3 {\n\twindow 16\n}\nbr 9":          `{"quality":3,"window":16}`, // stops at its own block
		"br {\n\tquality 11\n\twindow 24\n}\n ": `{"quality":11,"window":24}`,
	} {
		var b Brotli
		if err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err != nil {
			t.Errorf("%q: %v", input, err)
			continue
		}
		got, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != wantJSON {
			t.Errorf("%q: JSON %s, want %s", input, got, wantJSON)
		}
	}
}

func TestUnmarshalCaddyfileRefuses(t *testing.T) {
	for input, wantErr := range map[string]string{
		`br 12`:                         "br: quality 12: must be 0..11",
		`br -1`:                         "br: quality -1: must be 0..11",
		`br best`:                       `br: quality "best": not a number`,
		`br 5 6`:                        "wrong argument count",
		"br {\n\tquality 12\n}":         "br: quality 12: must be 0..11",
		"br {\n\tquality\n}":            "wrong argument count",
		"br {\n\twindow 9\n}":           "br: window 9: must be 10..24",
		"br {\n\twindow 25\n}":          "br: window 25: must be 10..24",
		"br {\n\twindow 4MB\n}":         `br: window "4MB": not a number`,
		"br {\n\twindow 20 21\n}":       "wrong argument count",
		"br 5 {\n\tquality 6\n}":        "br: quality already specified",
		"br {\n\twindow 20\nwindow 21}": "br: window already specified",
		"br {\n\tlevel 5\n}":            `br: unknown subdirective "level"`,
	} {
		var b Brotli
		err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: error %v, want %q", input, err, wantErr)
		}
	}
}
