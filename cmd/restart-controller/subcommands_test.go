package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestPointToPlugin(t *testing.T) {
	cases := []struct {
		args     []string
		wantRan  bool
		wantCode int
		want     string
	}{
		{nil, false, 0, ""},
		{[]string{"--config", "x"}, false, 0, ""},
		{[]string{"explain", "deploy/web"}, true, 2, "kubectl restart-controller explain ..."},
		{[]string{"status", "-A"}, true, 2, "kubectl restart-controller status ..."},
		{[]string{"check", "--config", "x"}, true, 2, "kubectl restart-controller check ..."},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		code, ran := pointToPlugin(c.args, &stderr)
		if ran != c.wantRan || code != c.wantCode || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: ran %v code %d stderr %q, want %v %d %q", c.args, ran, code, stderr.String(), c.wantRan, c.wantCode, c.want)
		}
		if lines := strings.Count(stderr.String(), "\n"); ran && lines != 1 {
			t.Errorf("%q: %d lines, want one", c.args, lines)
		}
	}
}
