package notify

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// WebhookVersion is the version of the webhook body. A change that could
// break a reader (a field removed or its meaning changed) gets a new
// version; fields may be added within one.
const WebhookVersion = "restart-controller.notification/v1"

// formatOf returns the encoding of a sink type (config.SinkTypes).
func formatOf(sinkType string) func(Message, string) ([]byte, error) {
	switch sinkType {
	case "teams":
		return teamsPayload
	case "webhook":
		return webhookPayload
	default: // slack, googleChat: incoming webhooks read {"text": ...}
		return textPayload
	}
}

// Webhook is the body posted to webhook sinks (docs/notifications.md).
type Webhook struct {
	Version  string   `json:"version"`
	Kind     Kind     `json:"kind"`
	Workload Workload `json:"workload"`
	// Sources is never null: an empty list when none is concerned.
	Sources []Source `json:"sources"`
	Outcome string   `json:"outcome"`
	Reason  string   `json:"reason,omitempty"`
	// Time is RFC 3339, UTC.
	Time       string `json:"time"`
	Controller string `json:"controller"`
	// Text is the sentence chat sinks get.
	Text string `json:"text"`
}

func webhookPayload(m Message, instance string) ([]byte, error) {
	sources := m.Sources
	if sources == nil {
		sources = []Source{}
	}
	return json.Marshal(Webhook{Version: WebhookVersion, Kind: m.Kind, Workload: m.Workload, Sources: sources,
		Outcome: m.Outcome, Reason: m.Reason, Time: m.Time.UTC().Format(time.RFC3339), Controller: instance,
		Text: Text(m, instance)})
}

func textPayload(m Message, instance string) ([]byte, error) {
	return json.Marshal(map[string]string{"text": Text(m, instance)})
}

// teamsPayload is a message with one Adaptive Card, the format Microsoft
// documents for Teams incoming webhooks and Workflows ("Post to a channel
// when a webhook request is received"); the older MessageCard belongs to
// the Office 365 connectors being retired.
func teamsPayload(m Message, instance string) ([]byte, error) {
	title, detail := headline(m), details(m, instance)
	body := []map[string]interface{}{
		{"type": "TextBlock", "text": title, "weight": "Bolder", "wrap": true},
	}
	for _, line := range detail {
		body = append(body, map[string]interface{}{"type": "TextBlock", "text": line, "wrap": true, "spacing": "Small"})
	}
	return json.Marshal(map[string]interface{}{
		"type": "message",
		"attachments": []map[string]interface{}{{
			"contentType": "application/vnd.microsoft.card.adaptive",
			"content": map[string]interface{}{
				"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
				"type":    "AdaptiveCard",
				"version": "1.4",
				"body":    body,
			},
		}},
	})
}

// Text is the notification as one sentence per line, for chat sinks.
func Text(m Message, instance string) string {
	return strings.Join(append([]string{headline(m)}, details(m, instance)...), "\n")
}

func headline(m Message) string {
	// kubectl's "resource.group", the resource alone for the core group.
	resource := schema.GroupResource{Group: m.Workload.Group, Resource: m.Workload.Resource}
	w := fmt.Sprintf("%s %s/%s", resource, m.Workload.Namespace, m.Workload.Name)
	switch m.Kind {
	case Restart:
		return "Restarted " + w + " to pick up changed data"
	case Hold:
		return "Restart of " + w + " held"
	case RolloutFailed:
		return "Rollout of " + w + " failed"
	case RolloutRecovered:
		return "Rollout of " + w + " recovered"
	}
	return fmt.Sprintf("%s: %s", m.Kind, w)
}

func details(m Message, instance string) []string {
	var out []string
	for _, s := range m.Sources {
		out = append(out, s.String())
	}
	if m.Reason != "" {
		out = append(out, m.Reason)
	}
	return append(out, fmt.Sprintf("at %s by %s", m.Time.UTC().Format(time.RFC3339), instance))
}

// String names the source and its keys as the Restarted Event does, e.g.
// "configmap/shop/app (changed keys: level)".
func (s Source) String() string {
	switch s.KeysAre {
	case KeysChanged:
		return fmt.Sprintf("%s (changed keys: %s)", s.ID, strings.Join(s.Keys, ", "))
	case KeysRead:
		return fmt.Sprintf("%s (keys %s)", s.ID, strings.Join(s.Keys, ", "))
	case KeysAll:
		return s.ID + " (all keys)"
	}
	return s.ID
}

// IDs lists the sources of a rollout record ("kind/namespace/name" to
// their change), sorted.
func IDs(sources map[string]string) []Source {
	out := make([]Source, 0, len(sources))
	for id := range sources {
		out = append(out, Source{ID: id})
	}
	slices.SortFunc(out, func(a, b Source) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Changed is a source whose change causes a restart, with the keys that
// changed among those the workload reads (read; nil: every key) when the
// change's keys are known, else the keys it reads.
func Changed(id string, read, changed []string, known bool) Source {
	if known {
		if read != nil {
			changed = slices.DeleteFunc(slices.Clone(changed), func(k string) bool { return !slices.Contains(read, k) })
		}
		if len(changed) > 0 {
			return Source{ID: id, Keys: changed, KeysAre: KeysChanged}
		}
	}
	if read != nil {
		return Source{ID: id, Keys: read, KeysAre: KeysRead}
	}
	return Source{ID: id, KeysAre: KeysAll}
}
