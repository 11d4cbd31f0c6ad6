// Package metrics defines the controller's Prometheus metrics on a private
// registry. The first seven names are those of xing's controller, kept so
// existing dashboards and alerts keep working after a switch.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const xingPrefix = "deployment_restart_controller_"

// Metrics are the controller's instruments. Every field is safe for concurrent use.
type Metrics struct {
	Registry *prometheus.Registry

	// Names of xing's controller, kept for compatibility.
	ResourceVersions  prometheus.Counter
	AnnotationUpdates prometheus.Counter
	Restarts          prometheus.Counter
	ChangesProcessed  prometheus.Counter
	changesWaiting    prometheus.Gauge

	// restart-controller's own.
	ChangesMerged    prometheus.Counter
	ReconcileErrors  *prometheus.CounterVec
	IgnoredErrors    prometheus.Counter
	ChangeToRestart  prometheus.Histogram
	PatchDuration    prometheus.Histogram
	Reconciling      prometheus.Gauge
	Ready            prometheus.Gauge
	Leader           prometheus.Gauge
	WatchedWorkloads *prometheus.GaugeVec
}

// New registers every metric on a new private registry. counts reports the
// number of cached sources and workloads at scrape time.
func New(counts func() (sources, workloads int)) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := factory{reg}
	m := &Metrics{
		Registry: reg,
		ResourceVersions: f.counter(xingPrefix+"resource_versions_total",
			"Source (ConfigMap, Secret) resource versions processed: every add, update and delete event."),
		AnnotationUpdates: f.counter(xingPrefix+"deployment_annotation_updates_total",
			"Workload patches written (checksum records and restarts)."),
		Restarts: f.counter(xingPrefix+"deployment_restarts_total",
			"Workload restarts: patches that set a new restart timestamp in the pod template."),
		ChangesProcessed: f.counter(xingPrefix+"changes_processed_total",
			"Config data changes observed (metadata-only updates are not changes)."),
		changesWaiting: f.gauge(xingPrefix+"changes_waiting_total",
			"Sources whose change is waiting for its grace period to end."),
		ChangesMerged: f.counter("restart_controller_changes_merged_total",
			"Config data changes merged into a grace period already open for that config."),
		ReconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "restart_controller_reconcile_errors_total",
			Help: "Failed workload reconciles by reason (conflict, transient, persistent).",
		}, []string{"reason"}),
		IgnoredErrors: f.counter("restart_controller_ignored_errors_total",
			"Errors matching --ignored-errors, warned about and skipped."),
		ChangeToRestart: f.histogram("restart_controller_change_to_restart_seconds",
			"Time from a source change being observed to the restart patch of a workload reading it.",
			[]float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120}),
		PatchDuration: f.histogram("restart_controller_patch_duration_seconds",
			"Duration of workload patch requests.", prometheus.DefBuckets),
		Reconciling: f.gauge("restart_controller_reconciles_in_flight",
			"Workload reconciles under way."),
		Ready: f.gauge("restart_controller_ready",
			"1 once the caches of every watched kind have synced."),
		Leader: f.gauge("restart_controller_leader",
			"1 while this instance holds the leader lease (or leader election is off)."),
		WatchedWorkloads: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "restart_controller_workload_kind_watched",
			Help: "1 for each configured workload kind that is served and watched, 0 while its resource is missing.",
		}, []string{"resource"}),
	}
	reg.MustRegister(m.ReconcileErrors, m.WatchedWorkloads)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: xingPrefix + "configs_total",
		Help: "Configs in the catalog.",
	}, func() float64 { c, _ := counts(); return float64(c) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: xingPrefix + "deployments_total",
		Help: "Workloads of every watched kind in the catalog.",
	}, func() float64 { _, w := counts(); return float64(w) }))
	return m
}

// SetChangesWaiting publishes how many sources are inside their grace period.
func (m *Metrics) SetChangesWaiting(n int) { m.changesWaiting.Set(float64(n)) }

type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}
