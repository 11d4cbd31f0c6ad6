package main

import (
	"math"
	"testing"
)

const metricsText = `# HELP apiserver_request_total x
apiserver_request_total{code="200",resource="deployments",subresource="",verb="PATCH"} 10
apiserver_request_total{code="409",resource="deployments",subresource="",verb="PATCH"} 2
apiserver_request_total{code="201",resource="events",subresource="",verb="POST"} 5
apiserver_request_total{code="200",resource="deployments",subresource="status",verb="PUT"} 3
apiserver_request_total{code="200",resource="configmaps",subresource="",verb="LIST"} 99
apiserver_request_total_other{verb="PATCH"} 1000
apiserver_request_duration_seconds_sum{resource="deployments",subresource="",verb="PATCH"} 1.2
apiserver_request_duration_seconds_count{resource="deployments",subresource="",verb="PATCH"} 12
etcd_request_duration_seconds_sum{operation="update",type="deployments.apps"} 0.5
etcd_request_duration_seconds_count{operation="update",type="deployments.apps"} 10
etcd_request_duration_seconds_sum{operation="listWithCount",type="pods"} 9
etcd_request_duration_seconds_count{operation="listWithCount",type="pods"} 1
restart_controller_leader 1
`

func TestSumOfMatchesLabelsAndNotLongerNames(t *testing.T) {
	if got := sumOf(metricsText, "apiserver_request_total", "verb", "PATCH"); got != 12 {
		t.Errorf("PATCHes = %v, want 12", got)
	}
	if got := sumOf(metricsText, "restart_controller_leader"); got != 1 {
		t.Errorf("leader = %v, want 1", got)
	}
}

func TestAPILoadCountsWritesByResourceAndTheirMeanDuration(t *testing.T) {
	s := parseAPIMetrics(metricsText)
	want := map[string]float64{"PATCH deployments": 12, "POST events": 5, "PUT deployments/status": 3}
	if len(s.requests) != len(want) {
		t.Fatalf("requests %v, want %v", s.requests, want)
	}
	for k, v := range want {
		if s.requests[k] != v {
			t.Errorf("%s = %v, want %v", k, s.requests[k], v)
		}
	}
	if s.durSum["PATCH deployments"] != 1.2 || s.durCount["PATCH deployments"] != 12 || s.etcdSum != 0.5 || s.etcdN != 10 {
		t.Errorf("durations %v / %v, etcd %v / %v: want 1.2 / 12, the update alone 0.5 / 10", s.durSum, s.durCount, s.etcdSum, s.etcdN)
	}
	before := &apiSnapshot{requests: map[string]float64{"PATCH deployments": 2}, durSum: map[string]float64{"PATCH deployments": 0.2},
		durCount: map[string]float64{"PATCH deployments": 2}, cpu: map[string]float64{"etcd": 1}}
	after := &apiSnapshot{requests: map[string]float64{"PATCH deployments": 12, "POST events": 5}, durSum: map[string]float64{"PATCH deployments": 1.2},
		durCount: map[string]float64{"PATCH deployments": 12}, etcdSum: 0.5, etcdN: 10, cpu: map[string]float64{"etcd": 1.5}}
	l := after.since(before)
	if got := l.writes(5); got != "PATCH deployments 10 (100 ms), POST events 5 (0 ms)" {
		t.Errorf("writes %q", got)
	}
	if l.total() != 15 || math.Abs(l.etcdMean-0.05) > 1e-9 || l.cpu["etcd"] != 0.5 {
		t.Errorf("total %v etcd mean %v cpu %v", l.total(), l.etcdMean, l.cpu)
	}
}
