// Package metrics defines the controller's Prometheus metrics on a private
// registry. The first seven names are those of xing's controller, kept so
// existing dashboards and alerts keep working after a switch.
package metrics

import (
	"strconv"
	"time"

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
	EventsDropped    prometheus.Counter
	DryRun           prometheus.Gauge
	RolloutDuration  *prometheus.HistogramVec
	Rollouts         *prometheus.CounterVec
	Held             *prometheus.GaugeVec
	Waiting          *prometheus.GaugeVec
	reloadOK         prometheus.Gauge
	reloadTime       prometheus.Gauge
	configInfo       *prometheus.GaugeVec
	KindDegraded     *prometheus.GaugeVec
	Notifications    NotifyCounters

	// Reloader's names (ExportReloaderNames); nil until exported.
	reloaderExecuted    *prometheus.CounterVec
	reloaderByNamespace *prometheus.CounterVec

	docs []Doc
	reg  factory
}

// Doc describes one metric for the README, which a test writes from this list
// so the two cannot drift.
type Doc struct {
	Name, Type, Help string
	Labels           []string
}

// Docs lists every metric this package registers, in registration order.
func (m *Metrics) Docs() []Doc { return append([]Doc(nil), m.docs...) }

// New registers every metric on a new private registry. counts reports the
// number of cached sources and workloads at scrape time.
func New(counts func() (sources, workloads int)) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{Registry: reg}
	f := factory{reg: reg, docs: &m.docs}
	m.reg = f

	m.ResourceVersions = f.counter(xingPrefix+"resource_versions_total",
		"Source (ConfigMap, Secret) resource versions processed: every add, update and delete event.")
	f.gaugeFunc(xingPrefix+"configs_total", "Sources (ConfigMaps, Secrets) in the catalog.",
		func() float64 { s, _ := counts(); return float64(s) })
	f.gaugeFunc(xingPrefix+"deployments_total", "Workloads of every watched kind in the catalog.",
		func() float64 { _, w := counts(); return float64(w) })
	m.AnnotationUpdates = f.counter(xingPrefix+"deployment_annotation_updates_total",
		"Workload patches written (checksum records and restarts).")
	m.Restarts = f.counter(xingPrefix+"deployment_restarts_total",
		"Workload restarts: patches that set a new restart timestamp in the pod template.")
	m.ChangesProcessed = f.counter(xingPrefix+"changes_processed_total",
		"Source data changes observed (metadata-only updates are not changes).")
	m.changesWaiting = f.gauge(xingPrefix+"changes_waiting_total",
		"Sources whose change is waiting for its grace period to end.")

	m.ChangesMerged = f.counter("restart_controller_changes_merged_total",
		"Source data changes merged into a grace period already open for that source.")
	m.ChangeToRestart = f.histogram("restart_controller_change_to_restart_seconds",
		"Time from a source change being observed to the restart patch of a workload reading it.",
		[]float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120})
	m.PatchDuration = f.histogram("restart_controller_patch_duration_seconds",
		"Duration of workload patch requests.", prometheus.DefBuckets)
	m.ReconcileErrors = f.counterVec("restart_controller_reconcile_errors_total",
		"Failed workload reconciles by reason (conflict, transient, persistent).", "reason")
	m.IgnoredErrors = f.counter("restart_controller_ignored_errors_total",
		"Errors matching --ignored-errors, warned about and skipped.")
	m.Reconciling = f.gauge("restart_controller_reconciles_in_flight",
		"Workload reconciles under way.")
	m.Ready = f.gauge("restart_controller_ready",
		"1 once the caches of every watched kind have synced (a kind it may not list or watch is not waited for).")
	m.Leader = f.gauge("restart_controller_leader",
		"1 while this instance holds the leader lease (or leader election is off).")
	m.WatchedWorkloads = f.gaugeVec("restart_controller_workload_kind_watched",
		"1 for each configured workload kind that is served and watched, 0 while its resource is missing or this process may not list or watch it.", "resource")
	m.KindDegraded = f.gaugeVec("restart_controller_kind_degraded",
		"1 for each configured source or workload kind (per watched namespace; none: all) that is degraded, by reason: "+
			"forbidden (may not list or watch: not cached, not waited for), not_found (no longer served), "+
			"patch_forbidden (watched, but may not patch: cannot restart). Absent once it works.",
		"resource", "namespace", "reason")
	m.EventsDropped = f.counter("restart_controller_events_dropped_total",
		"Events not written because the Event rate limit was reached (the restarts are still logged).")
	m.reloadOK = f.gauge("restart_controller_config_last_reload_successful",
		"1 when the last load of the config file succeeded; 0 when a changed file was refused and the previous config stays in force.")
	m.reloadTime = f.gauge("restart_controller_config_last_reload_timestamp_seconds",
		"When the config file was last loaded or refused, in Unix seconds.")
	m.configInfo = f.gaugeVec("restart_controller_config_info",
		"1 for the hash (of the file's bytes) of the config in force.", "hash")
	m.DryRun = f.gauge("restart_controller_dry_run",
		"1 when running with --dry-run: decisions are made and reported, nothing is patched.")
	m.Rollouts = f.counterVec("restart_controller_rollouts_total",
		"Rollouts followed after a restart, by outcome: complete, failed (by the workload's own status, or not complete within its deadline), not-rolling (paused, OnDelete).", "outcome")
	m.RolloutDuration = f.histogramVec("restart_controller_rollout_duration_seconds",
		"Time from a restart to the end of the rollout that followed it, by outcome.",
		[]float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600}, "outcome")
	m.Held = f.gaugeVec("restart_controller_restarts_held",
		"Workloads whose due restart is held, by reason: wave (a rollout of the same change failed) or breaker (restarted too often).", "reason")
	m.Waiting = f.gaugeVec("restart_controller_restarts_waiting",
		"Workloads whose due restart waits, without a hold, by reason: window (its restart window is closed) or min-interval (its minimum interval since its last restart is not over).", "reason")
	// Every reason is exposed from the start, so a count of zero reads as 0
	// rather than as a missing series.
	m.SetStanding(nil, nil)
	m.Notifications = f.notifyCounters()
	return m
}

// ExportReloaderNames registers Reloader's reload counters too
// (metrics.reloaderCompatible): reloader_reload_executed_total{success},
// and with byNamespace reloader_reload_executed_total_by_namespace. Call
// it once, before any restart is counted.
func (m *Metrics) ExportReloaderNames(byNamespace bool) {
	m.reloaderExecuted = m.reg.counterVec("reloader_reload_executed_total",
		"Restart patches, by success: true when the API server took the patch, false when it refused it or failed "+
			"(Reloader's name; with metrics.reloaderCompatible).", "success")
	// As in Reloader, both series exist from the start.
	m.reloaderExecuted.WithLabelValues("true")
	m.reloaderExecuted.WithLabelValues("false")
	if byNamespace {
		m.reloaderByNamespace = m.reg.counterVec("reloader_reload_executed_total_by_namespace",
			"Restart patches, by success and the workload's namespace "+
				"(Reloader's name; with metrics.reloaderCompatible and metrics.reloaderByNamespace).", "success", "namespace")
	}
}

// RestartPatched counts a restart patch sent for a workload in namespace:
// taken by the API server (ok) or not. Only Reloader's names count it; the
// controller's own restart counter counts restarts decided.
func (m *Metrics) RestartPatched(namespace string, ok bool) {
	if m.reloaderExecuted == nil {
		return
	}
	success := strconv.FormatBool(ok)
	m.reloaderExecuted.WithLabelValues(success).Inc()
	if m.reloaderByNamespace != nil {
		m.reloaderByNamespace.WithLabelValues(success, namespace).Inc()
	}
}

// SetStanding publishes how many restarts are held, and how many wait,
// for each reason.
func (m *Metrics) SetStanding(held, waiting map[string]int) {
	for _, reason := range []string{"wave", "breaker"} {
		m.Held.WithLabelValues(reason).Set(float64(held[reason]))
	}
	for _, reason := range []string{"window", "min-interval"} {
		m.Waiting.WithLabelValues(reason).Set(float64(waiting[reason]))
	}
}

// SetConfigLoaded records a load of the config file: its hash when it is put
// in force, or a refusal (ok false), which leaves the hash in force as it was.
func (m *Metrics) SetConfigLoaded(hash string, ok bool, at time.Time) {
	m.reloadTime.Set(float64(at.UnixNano()) / 1e9)
	if !ok {
		m.reloadOK.Set(0)
		return
	}
	m.reloadOK.Set(1)
	m.configInfo.Reset()
	m.configInfo.WithLabelValues(hash).Set(1)
}

// SetChangesWaiting publishes how many sources are inside their grace period.
func (m *Metrics) SetChangesWaiting(n int) { m.changesWaiting.Set(float64(n)) }

// factory registers metrics and records their docs.
type factory struct {
	reg  *prometheus.Registry
	docs *[]Doc
}

// add registers c and records its doc.
func add[C prometheus.Collector](f factory, c C, typ, name, help string, labels ...string) C {
	f.reg.MustRegister(c)
	*f.docs = append(*f.docs, Doc{Name: name, Type: typ, Help: help, Labels: labels})
	return c
}

func opts(name, help string) prometheus.Opts { return prometheus.Opts{Name: name, Help: help} }

func (f factory) counter(name, help string) prometheus.Counter {
	return add(f, prometheus.NewCounter(prometheus.CounterOpts(opts(name, help))), "counter", name, help)
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return add(f, prometheus.NewCounterVec(prometheus.CounterOpts(opts(name, help)), labels), "counter", name, help, labels...)
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	return add(f, prometheus.NewGauge(prometheus.GaugeOpts(opts(name, help))), "gauge", name, help)
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return add(f, prometheus.NewGaugeVec(prometheus.GaugeOpts(opts(name, help)), labels), "gauge", name, help, labels...)
}

func (f factory) gaugeFunc(name, help string, value func() float64) {
	add(f, prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts(name, help)), value), "gauge", name, help)
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return add(f, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels), "histogram", name, help, labels...)
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	return add(f, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}), "histogram", name, help)
}
