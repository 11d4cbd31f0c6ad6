package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// QueueMetrics returns a workqueue metrics provider that registers on this
// registry, so the queue needs no process-global provider.
func (m *Metrics) QueueMetrics() workqueue.MetricsProvider { return queueMetrics{m.Registry} }

type queueMetrics struct{ reg *prometheus.Registry }

// register registers c, or returns the collector already registered under
// its name: a config reload builds a new queue of the same name, whose
// metrics must continue the old series rather than clash with them.
func register[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("registering workqueue metric: %v", err)) // a programming error
	}
	return c
}

func queueOpts(queue, name, help string) prometheus.Opts {
	return prometheus.Opts{Subsystem: "workqueue", Name: name, Help: help, ConstLabels: prometheus.Labels{"name": queue}}
}

func (q queueMetrics) gauge(queue, name, help string) prometheus.Gauge {
	return register(q.reg, prometheus.NewGauge(prometheus.GaugeOpts(queueOpts(queue, name, help))))
}

func (q queueMetrics) counter(queue, name, help string) prometheus.Counter {
	return register(q.reg, prometheus.NewCounter(prometheus.CounterOpts(queueOpts(queue, name, help))))
}

func (q queueMetrics) histogram(queue, name, help string) prometheus.Histogram {
	o := queueOpts(queue, name, help)
	return register(q.reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: o.Subsystem, Name: o.Name, Help: o.Help, ConstLabels: o.ConstLabels,
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
	}))
}

func (q queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.gauge(name, "depth", "Current depth of the workqueue.")
}

func (q queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.counter(name, "adds_total", "Adds handled by the workqueue.")
}

func (q queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.histogram(name, "queue_duration_seconds", "Seconds an item stays in the workqueue before being requested.")
}

func (q queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.histogram(name, "work_duration_seconds", "Seconds processing an item from the workqueue takes.")
}

func (q queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.gauge(name, "unfinished_work_seconds", "Seconds of work in progress not yet observed by work_duration.")
}

func (q queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.gauge(name, "longest_running_processor_seconds", "Seconds the longest running processor has been running.")
}

func (q queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.counter(name, "retries_total", "Retries handled by the workqueue.")
}
