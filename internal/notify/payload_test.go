package notify

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden payloads in testdata")

var at = time.Date(2026, 11, 25, 15, 4, 5, 0, time.UTC)

func sampleMessages() map[string]Message {
	web := Workload{Group: "apps", Resource: "deployments", Namespace: "shop", Name: "web"}
	return map[string]Message{
		"restart": {Kind: Restart, Workload: web, Outcome: "restarted", Time: at, Sources: []Source{
			{ID: "configmap/shop/app", Keys: []string{"level", "mode"}, KeysAre: KeysChanged},
			{ID: "secret/shop/db", Keys: []string{"password"}, KeysAre: KeysRead},
			{ID: "configmap/shop/all", KeysAre: KeysAll},
		}},
		"hold": {Kind: Hold, Workload: web, Outcome: "held", Time: at, Sources: []Source{{ID: "configmap/shop/app"}},
			Reason: "the change 3f2a of configmap/shop/app is halted: a rollout of it failed: apps/deployments/shop/api: ProgressDeadlineExceeded"},
		"rolloutFailed": {Kind: RolloutFailed, Workload: Workload{Resource: "pods", Namespace: "n", Name: "p"}, Outcome: "failed", Time: at,
			Reason: "ProgressDeadlineExceeded: ReplicaSet \"web-7c\" has timed out progressing."},
	}
}

// Each sink type's payload is the golden file's, byte for byte (go test
// ./internal/notify -run TestPayloads -update rewrites them; review the
// diff).
func TestPayloads(t *testing.T) {
	for _, typ := range []string{"slack", "teams", "googleChat", "webhook"} {
		for name, m := range sampleMessages() {
			got, err := formatOf(typ)(m, "restart-controller-7d9f-abcde")
			if err != nil {
				t.Fatal(err)
			}
			var indented bytes.Buffer
			if err := json.Indent(&indented, got, "", "  "); err != nil {
				t.Fatalf("%s %s: not JSON: %v", typ, name, err)
			}
			indented.WriteByte('\n')
			golden := filepath.Join("testdata", typ+"-"+name+".json")
			if *update {
				if err := os.WriteFile(golden, indented.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(indented.Bytes(), want) {
				t.Errorf("%s payload for %s:\n%s\nwant (%s):\n%s", typ, name, indented.Bytes(), golden, want)
			}
		}
	}
}

// The webhook body decodes into its documented fields, strictly.
func TestWebhookBodyIsDocumented(t *testing.T) {
	body, err := webhookPayload(sampleMessages()["restart"], "me")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var w Webhook
	if err := dec.Decode(&w); err != nil {
		t.Fatal(err)
	}
	if w.Version != WebhookVersion || w.Kind != Restart || w.Workload.Name != "web" || len(w.Sources) != 3 ||
		w.Time != "2026-11-25T15:04:05Z" || w.Controller != "me" {
		t.Errorf("webhook body %+v", w)
	}
	empty, _ := webhookPayload(Message{Kind: RolloutFailed, Time: at}, "me")
	if !bytes.Contains(empty, []byte(`"sources":[]`)) {
		t.Errorf("a message without sources has %s, want an empty list", empty)
	}
}

// Changed names the keys that changed among those read, when known; else
// the keys read, or all of them.
func TestChanged(t *testing.T) {
	for _, tt := range []struct {
		name          string
		read, changed []string
		known         bool
		want          string
	}{
		{"changed among read", []string{"a", "b"}, []string{"b", "c"}, true, "cm/n/x (changed keys: b)"},
		{"reads every key", nil, []string{"b", "c"}, true, "cm/n/x (changed keys: b, c)"},
		{"none of the read keys known to change", []string{"a"}, []string{"c"}, true, "cm/n/x (keys a)"},
		{"not known", []string{"a"}, nil, false, "cm/n/x (keys a)"},
		{"not known, every key", nil, nil, false, "cm/n/x (all keys)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			changed := append([]string(nil), tt.changed...)
			if got := Changed("cm/n/x", tt.read, changed, tt.known).String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if !slices.Equal(changed, tt.changed) {
				t.Errorf("Changed modified its argument: %v", changed)
			}
		})
	}
}
