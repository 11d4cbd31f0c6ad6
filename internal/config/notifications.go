package config

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FileNotifications are the messages sent to chat and webhook sinks when
// a workload is restarted, a restart is held, or a rollout fails or
// recovers (docs/notifications.md).
type FileNotifications struct {
	Sinks []FileSink `json:"sinks"`
}

// FileSink is one place notifications are posted to.
type FileSink struct {
	// Name names the sink in logs, errors and the metrics' sink label; its
	// URL never appears anywhere.
	Name string `json:"name"`
	// Type is the payload format: slack, teams, googleChat or webhook.
	Type string `json:"type"`
	// URLSecret is the key of a Secret in the controller's namespace
	// (leaderElection.namespace) holding the sink's URL: webhook URLs are
	// credentials.
	URLSecret FileSecretKey `json:"urlSecret"`
	// Send lists the notifications sent: restart, hold, rolloutFailed,
	// rolloutRecovered; empty means all of them (compiled, it is never empty).
	Send []string `json:"send"`
	// RatePerSecond and Burst limit the requests sent to the sink; 0 means
	// 1 per second and a burst of 5.
	RatePerSecond float64 `json:"ratePerSecond"`
	Burst         int     `json:"burst"`
	// QueueSize bounds the notifications waiting for the sink; 0 means 100.
	QueueSize int `json:"queueSize"`
}

// FileSecretKey names one key of a Secret.
type FileSecretKey struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// The notifications a sink may be sent.
const (
	NotifyRestart          = "restart"
	NotifyHold             = "hold"
	NotifyRolloutFailed    = "rolloutFailed"
	NotifyRolloutRecovered = "rolloutRecovered"
)

// NotificationKinds lists every notification, in the order documented.
func NotificationKinds() []string {
	return []string{NotifyRestart, NotifyHold, NotifyRolloutFailed, NotifyRolloutRecovered}
}

// SinkTypes lists the payload formats of sinks.
func SinkTypes() []string { return []string{"slack", "teams", "googleChat", "webhook"} }

// Sink is a notification sink: the file's, checked, with its defaults
// filled in (compileNotifications).
type Sink = FileSink

// Wants reports whether the sink is sent notifications of this kind.
func (s Sink) Wants(kind string) bool { return slices.Contains(s.Send, kind) }

const (
	defaultSinkRate  = 1
	defaultSinkBurst = 5
	defaultQueueSize = 100
	maxQueueSize     = 10000
	maxSinkRate      = 100
	maxSinkBurst     = 1000
)

// compileNotifications checks the sinks and fills in their defaults.
func compileNotifications(f FileNotifications, p *problems) []Sink {
	var out []Sink
	for i, s := range f.Sinks {
		path := fmt.Sprintf("notifications.sinks[%d]", i)
		if s.Name == "" {
			p.add(path+".name", errRequired)
		}
		for j, other := range f.Sinks[:i] {
			if s.Name != "" && other.Name == s.Name {
				p.addf(path+".name", "duplicate sink %q (also notifications.sinks[%d])", s.Name, j)
			}
		}
		checkOneOf(p, path+".type", s.Type, SinkTypes())
		checkName(p, path+".urlSecret.name", s.URLSecret.Name, validation.IsDNS1123Subdomain)
		checkName(p, path+".urlSecret.key", s.URLSecret.Key, validation.IsConfigMapKey)
		for j, kind := range s.Send {
			at := fmt.Sprintf("%s.send[%d]", path, j)
			if checkOneOf(p, at, kind, NotificationKinds()) && slices.Contains(s.Send[:j], kind) {
				p.addf(at, "duplicate %q", kind)
			}
		}
		if len(s.Send) == 0 {
			s.Send = NotificationKinds()
		}
		if s.RatePerSecond == 0 {
			s.RatePerSecond = defaultSinkRate
		} else if !(s.RatePerSecond > 0 && s.RatePerSecond <= maxSinkRate) {
			p.addf(path+".ratePerSecond", "must be more than 0 and at most %d, got %v", maxSinkRate, s.RatePerSecond)
		}
		if s.Burst == 0 {
			s.Burst = defaultSinkBurst
		}
		checkRange(p, path+".burst", s.Burst, 1, maxSinkBurst)
		if s.QueueSize == 0 {
			s.QueueSize = defaultQueueSize
		}
		checkRange(p, path+".queueSize", s.QueueSize, 1, maxQueueSize)
		out = append(out, s)
	}
	return out
}
