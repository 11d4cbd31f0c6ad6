package main

import "testing"

// Samples are summed across label sets, filtered by labels (an absent label
// reads as ""), and a histogram's _sum and _count come from its family.
func TestMetricSum(t *testing.T) {
	const text = `# TYPE requests_total counter
requests_total{verb="PATCH",resource="deployments",subresource=""} 2
requests_total{verb="PATCH",resource="deployments",subresource="status"} 5
requests_total{verb="GET",resource="apps/v1, Resource=daemonsets"} 3
# TYPE patch_seconds histogram
patch_seconds_bucket{le="+Inf"} 4
patch_seconds_sum 0.5
patch_seconds_count 4
`
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
		found  bool
	}{
		{"requests_total", nil, 10, true},
		{"requests_total", []string{`verb="PATCH"`, `subresource=""`}, 2, true},
		{"requests_total", []string{`resource="apps/v1, Resource=daemonsets"`}, 3, true},
		{"requests_total", []string{`verb="PUT"`}, 0, false},
		{"patch_seconds_sum", nil, 0.5, true},
		{"patch_seconds_count", nil, 4, true},
		{"absent_total", nil, 0, false},
	} {
		if got, found := metricSum(text, c.name, c.labels...); got != c.want || found != c.found {
			t.Errorf("%s %v: %v, %v; want %v, %v", c.name, c.labels, got, found, c.want, c.found)
		}
	}
	if _, found := metricSum("not { metrics", "requests_total"); found {
		t.Error("text that does not parse matched")
	}
}
