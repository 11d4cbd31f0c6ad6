package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// xing's controller's seven names are a compatibility promise: dashboards
// and alerts written for it must keep finding them.
func TestXingMetricNames(t *testing.T) {
	m := New(func() (int, int) { return 3, 2 })
	m.ChangesProcessed.Inc()
	m.SetChangesWaiting(1)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "workloads", MetricsProvider: m.QueueMetrics()})
	defer q.ShutDown()
	q.Add("x")

	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			switch {
			case metric.GetCounter() != nil:
				values[f.GetName()] += metric.GetCounter().GetValue()
			case metric.GetGauge() != nil:
				values[f.GetName()] += metric.GetGauge().GetValue()
			default:
				values[f.GetName()] += 0
			}
		}
	}
	want := map[string]float64{
		"deployment_restart_controller_resource_versions_total":             0,
		"deployment_restart_controller_configs_total":                       3,
		"deployment_restart_controller_deployments_total":                   2,
		"deployment_restart_controller_deployment_annotation_updates_total": 0,
		"deployment_restart_controller_deployment_restarts_total":           0,
		"deployment_restart_controller_changes_processed_total":             1,
		"deployment_restart_controller_changes_waiting_total":               1,
		"workqueue_depth": 1,
	}
	for name, v := range want {
		got, ok := values[name]
		if !ok {
			t.Errorf("%s not served", name)
		} else if got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
}

// Docs feeds the README's metrics table: every metric the registry serves
// must be in it.
func TestDocsCoverTheRegistry(t *testing.T) {
	m := New(func() (int, int) { return 0, 0 })
	m.ReconcileErrors.WithLabelValues("conflict").Inc()
	m.WatchedWorkloads.WithLabelValues("deployments.apps").Set(1)
	m.SetConfigLoaded("abc", true, time.Now())
	m.Rollouts.WithLabelValues("complete").Inc()
	m.RolloutDuration.WithLabelValues("complete").Observe(1)
	m.KindDegraded.WithLabelValues("daemonsets.apps", "", "forbidden").Set(1)
	m.ExportReloaderNames(true)
	m.RestartPatched("shop", true)
	for _, c := range []*prometheus.CounterVec{m.Notifications.Sent, m.Notifications.Failed, m.Notifications.Dropped} {
		c.WithLabelValues("chat")
	}
	documented := map[string]bool{}
	for _, d := range m.Docs() {
		documented[d.Name] = true
	}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ours := 0
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "restart_controller_") && !strings.HasPrefix(name, xingPrefix) && !strings.HasPrefix(name, "reloader_") {
			continue // Go runtime and process collectors
		}
		ours++
		if !documented[name] {
			t.Errorf("%s is served but missing from Docs", name)
		}
	}
	if ours != len(documented) {
		t.Errorf("%d metrics served, %d documented", ours, len(documented))
	}
}

// A config reload builds a new queue of the same name on the same registry;
// its metrics continue the old series instead of panicking.
func TestQueueMetricsSurviveASecondQueue(t *testing.T) {
	m := New(func() (int, int) { return 0, 0 })
	for i := 0; i < 2; i++ {
		q := workqueue.NewTypedWithConfig[string](workqueue.TypedQueueConfig[string]{Name: "workloads", MetricsProvider: m.QueueMetrics()})
		q.Add("x")
		q.ShutDown()
	}
	// One series, continued by the second queue: both adds counted.
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	adds := -1.0
	for _, f := range families {
		if f.GetName() == "workqueue_adds_total" {
			if len(f.GetMetric()) != 1 {
				t.Fatalf("%d workqueue_adds_total series, want 1", len(f.GetMetric()))
			}
			adds = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if adds != 2 {
		t.Fatalf("workqueue_adds_total = %v after two queues of one add each, want 2", adds)
	}
}

// Reloader's names, as its source defines them: the counter with both
// success series from the start, and the per-namespace one only when asked
// for; nothing is counted before they are exported.
func TestReloaderMetricNames(t *testing.T) {
	m := New(func() (int, int) { return 0, 0 })
	m.RestartPatched("shop", true) // not exported: counts nowhere, no panic
	if got := serve(t, m); strings.Contains(got, "reloader_") {
		t.Fatalf("Reloader's names served without being exported:\n%s", got)
	}
	m.ExportReloaderNames(false)
	m.RestartPatched("shop", true)
	m.RestartPatched("shop", true)
	m.RestartPatched("web", false)
	got := serve(t, m)
	for _, want := range []string{`reloader_reload_executed_total{success="true"} 2`, `reloader_reload_executed_total{success="false"} 1`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s in\n%s", want, got)
		}
	}
	if strings.Contains(got, "by_namespace") {
		t.Errorf("the per-namespace counter is served without being asked for")
	}

	m = New(func() (int, int) { return 0, 0 })
	m.ExportReloaderNames(true)
	m.RestartPatched("shop", false)
	if got := serve(t, m); !strings.Contains(got, `reloader_reload_executed_total_by_namespace{namespace="shop",success="false"} 1`) {
		t.Errorf("per-namespace counter missing in\n%s", got)
	}
}

// serve returns the registry's counters, one line each:
// name{label="value",...} value, labels sorted by name.
func serve(t *testing.T, m *Metrics) string {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			if metric.GetCounter() == nil {
				continue
			}
			var labels []string
			for _, l := range metric.GetLabel() { // sorted by name
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			fmt.Fprintf(&b, "%s{%s} %v\n", f.GetName(), strings.Join(labels, ","), metric.GetCounter().GetValue())
		}
	}
	return b.String()
}
