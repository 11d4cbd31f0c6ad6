package metrics

import "github.com/prometheus/client_golang/prometheus"

// NotifyCounters count the notifications of each sink by what became of
// them. A notification ends in exactly one of them.
type NotifyCounters struct {
	Sent, Failed, Dropped *prometheus.CounterVec
}

func (f factory) notifyCounters() NotifyCounters {
	return NotifyCounters{
		Sent: f.counterVec("restart_controller_notifications_sent_total",
			"Notifications delivered, by sink (the sink answered 2xx).", "sink"),
		Failed: f.counterVec("restart_controller_notifications_failed_total",
			"Notifications given up on, by sink: every attempt failed, or the sink refused it (a 3xx, or a 4xx other than 408 and 429).", "sink"),
		Dropped: f.counterVec("restart_controller_notifications_dropped_total",
			"Notifications not attempted, by sink: its queue was full, or shutdown came first.", "sink"),
	}
}
