package enum

import "testing"

type mode string

const (
	enforce mode = "enforce"
	observe mode = "observe"
	audit   mode = "audit"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		values  []mode
		want    mode
		wantErr string
	}{
		{"observe", []mode{enforce, observe}, observe, ""},
		{"enforce", []mode{enforce, observe}, enforce, ""},
		{"Enforce", []mode{enforce, observe}, "", `"Enforce": must be enforce or observe`},
		{"", []mode{enforce, observe, audit}, "", `"": must be enforce, observe or audit`},
		{"x", []mode{enforce}, "", `"x": must be enforce`},
	} {
		got, err := Parse(tc.in, tc.values...)
		switch {
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("Parse(%q): %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
			t.Errorf("Parse(%q): error %v; want %s", tc.in, err, tc.wantErr)
		}
	}
}
