// Package promtext reads values out of Prometheus' text exposition format, for
// the tests and the benchmark that watch the controller from outside.
package promtext

import (
	"bufio"
	"strconv"
	"strings"
)

// Sum adds up every sample of the named metric in Prometheus text
// whose labels contain every one of the given `key="value"` strings.
func Sum(text, name string, labels ...string) (float64, bool) {
	var total float64
	found := false
	s := bufio.NewScanner(strings.NewReader(text))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(name):]
		var lbl string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			lbl, rest = rest[:end+1], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // a longer metric name
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(lbl, l) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		total += v
		found = true
	}
	return total, found
}
