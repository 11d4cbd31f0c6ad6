package promtext

import "testing"

const exposition = `# HELP workqueue_depth Current depth.
# TYPE workqueue_depth gauge
workqueue_depth{name="workloads"} 3
workqueue_depth_total 99
restart_controller_reconcile_errors_total{reason="conflict"} 2
restart_controller_reconcile_errors_total{reason="transient"} 5
apiserver_request_total{resource="deployments",subresource="",verb="PATCH"} 7
apiserver_request_total{resource="deployments",subresource="status",verb="PATCH"} 11
plain 1.5e+01
`

func TestSum(t *testing.T) {
	cases := []struct {
		name   string
		labels []string
		want   float64
		found  bool
	}{
		{"workqueue_depth", nil, 3, true}, // not workqueue_depth_total
		{"restart_controller_reconcile_errors_total", nil, 7, true},
		{"restart_controller_reconcile_errors_total", []string{`reason="conflict"`}, 2, true},
		{"apiserver_request_total", []string{`verb="PATCH"`, `subresource=""`}, 7, true},
		{"plain", nil, 15, true},
		{"absent_metric", nil, 0, false},
		{"restart_controller_reconcile_errors_total", []string{`reason="none"`}, 0, false},
	}
	for _, c := range cases {
		got, found := Sum(exposition, c.name, c.labels...)
		if got != c.want || found != c.found {
			t.Errorf("Sum(%s, %v) = %v, %v; want %v, %v", c.name, c.labels, got, found, c.want, c.found)
		}
	}
}
