package logging

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

func TestLogrRoutesKlogLevels(t *testing.T) {
	cases := []struct {
		name    string
		verbose bool
		log     func(buf *bytes.Buffer)
		want    []string // substrings; empty = nothing logged
	}{
		{"info", false, func(b *bytes.Buffer) { Logr(New(b, "text", false)).Info("watch started", "resource", "configmaps") },
			[]string{"[INFO]", "watch started", "resource=configmaps"}},
		{"V(2) hidden without verbose", false, func(b *bytes.Buffer) { Logr(New(b, "text", false)).V(2).Info("chatty") }, nil},
		{"V(2) is debug with verbose", true, func(b *bytes.Buffer) { Logr(New(b, "text", true)).V(2).Info("chatty") },
			[]string{"[DEBUG]", "chatty"}},
		{"error keeps the error", false, func(b *bytes.Buffer) {
			Logr(New(b, "text", false)).WithName("reflector").Error(errors.New("boom"), "list failed")
		}, []string{"[ERROR]", "reflector", "list failed", "error=boom"}},
		{"json", false, func(b *bytes.Buffer) { Logr(New(b, "json", false)).Info("synced", "n", 3) },
			[]string{`"@message":"synced"`, `"n":3`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			c.log(&buf)
			out := buf.String()
			if len(c.want) == 0 && out != "" {
				t.Fatalf("want nothing logged, got %q", out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Fatalf("%q missing from %q", w, out)
				}
			}
		})
	}
}

// --verbose promises client-go's debug lines: klog drops V(n) lines by its own
// verbosity before any logger sees them, so RouteKlog must raise it.
func TestRouteKlogShowsClientGoDebugOnlyWhenVerbose(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		var buf bytes.Buffer
		if err := RouteKlog(New(&buf, "text", verbose), verbose); err != nil {
			t.Fatal(err)
		}
		klog.V(4).Info("reflector detail")
		klog.Background().V(2).Info("informer detail")
		klog.V(6).Info("request line")
		out := buf.String()
		shown := strings.Contains(out, "reflector detail") && strings.Contains(out, "informer detail")
		if shown != verbose {
			t.Errorf("verbose=%v: client-go debug shown=%v, log %q", verbose, shown, out)
		}
		if strings.Contains(out, "request line") {
			t.Errorf("verbose=%v: per-request lines must stay hidden: %q", verbose, out)
		}
	}
	klog.ClearLogger()
}
