package rollout

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// TestEvaluateFixtures reads every fixture object, whose annotation "want"
// holds the expected phase and reason, by the rule of its file's kind.
func TestEvaluateFixtures(t *testing.T) {
	files := map[string]Kind{
		"deployment.yaml":       KindDeployment,
		"statefulset.yaml":      KindStatefulSet,
		"daemonset.yaml":        KindDaemonSet,
		"rollout.yaml":          KindArgoRollout,
		"deploymentconfig.yaml": KindDeploymentConfig,
		"conditions.yaml":       KindConditions,
	}
	for file, kind := range files {
		raw, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		cases := 0
		for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
			obj := map[string]interface{}{}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			meta := object(obj)
			name, _ := meta.str("metadata", "name")
			want, _ := meta.str("metadata", "annotations", "want")
			wantPhase, wantReason, _ := strings.Cut(want, "/")
			cases++
			t.Run(strings.TrimSuffix(file, ".yaml")+"/"+name, func(t *testing.T) {
				got := Rule{Kind: kind}.Evaluate(obj)
				if string(got.Phase) != wantPhase || got.Reason != wantReason {
					t.Errorf("got %s, want %s/%s", got, wantPhase, wantReason)
				}
			})
		}
		if cases < 5 {
			t.Errorf("%s: only %d fixtures", file, cases)
		}
	}
}

func TestNoneNeverFollows(t *testing.T) {
	got := Rule{Kind: KindNone}.Evaluate(map[string]interface{}{"status": map[string]interface{}{}})
	if got.Phase != NotRolling {
		t.Fatalf("got %s", got)
	}
}

func TestReadyConditionsOrder(t *testing.T) {
	obj := map[string]interface{}{
		"metadata": map[string]interface{}{"generation": int64(2)},
		"status": map[string]interface{}{"conditions": []interface{}{
			map[string]interface{}{"type": "Ready", "status": "False"},
			map[string]interface{}{"type": "Synced", "status": "True"},
		}},
	}
	if got := (Rule{Kind: KindConditions, ReadyConditions: []string{"Synced", "Ready"}}).Evaluate(obj); got.Phase != Complete {
		t.Errorf("Synced first: got %s", got)
	}
	if got := (Rule{Kind: KindConditions}).Evaluate(obj); got.Phase != Progressing || got.Reason != "NotReady" {
		t.Errorf("default (Ready first): got %s", got)
	}
}

func TestMessageBounded(t *testing.T) {
	long := strings.Repeat("x", 5000)
	obj := map[string]interface{}{"status": map[string]interface{}{"conditions": []interface{}{
		map[string]interface{}{"type": "Ready", "status": "False", "message": long},
	}}}
	got := Rule{Kind: KindConditions}.Evaluate(obj)
	if len(got.Message) != maxMessage || !strings.HasSuffix(got.Message, "...") {
		t.Fatalf("message of %d bytes", len(got.Message))
	}
}

// Wrong types read as missing, never as a panic: objects are from anywhere.
func TestHostileShapes(t *testing.T) {
	for _, kind := range Kinds {
		for _, obj := range []map[string]interface{}{
			nil,
			{"status": "weird"},
			{"metadata": map[string]interface{}{"generation": "x"}, "spec": []interface{}{1}},
			{"status": map[string]interface{}{"conditions": []interface{}{"x", 3, nil, map[string]interface{}{"type": 5}}}},
			{"status": map[string]interface{}{"observedGeneration": 1.5, "replicas": true}},
		} {
			// Never a panic, a known phase, and never failed: nothing
			// here reports a failure (an empty status may well be
			// complete: nothing desired, nothing to wait for).
			s := (Rule{Kind: kind}).Evaluate(obj)
			if !slices.Contains([]Phase{Progressing, Complete, NotRolling}, s.Phase) {
				t.Errorf("%s: %v evaluated as %s", kind, obj, s)
			}
		}
	}
}

func TestBuiltinKind(t *testing.T) {
	for gvr, want := range map[schema.GroupVersionResource]Kind{
		{Group: "apps", Version: "v1", Resource: "deployments"}:                    KindDeployment,
		{Group: "apps", Version: "v1", Resource: "statefulsets"}:                   KindStatefulSet,
		{Group: "apps", Version: "v1", Resource: "daemonsets"}:                     KindDaemonSet,
		{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}:          KindArgoRollout,
		{Group: "apps.openshift.io", Version: "v1", Resource: "deploymentconfigs"}: KindDeploymentConfig,
		{Group: "batch", Version: "v1", Resource: "cronjobs"}:                      KindConditions,
		{Group: "example.com", Version: "v1", Resource: "deployments"}:             KindConditions,
	} {
		if got := BuiltinKind(gvr); got != want {
			t.Errorf("%s: got %s, want %s", gvr, got, want)
		}
	}
}

func TestJudge(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rule := Rule{Kind: KindDeployment, Deadline: time.Minute}
	progress := Status{Phase: Progressing, Reason: "LessAvailable", Message: "available 1/2"}
	for _, tc := range []struct {
		name   string
		status Status
		at     time.Duration
		want   Result
		reason string
		wait   time.Duration
	}{
		{"progressing inside the deadline", progress, 20 * time.Second, ResultPending, "LessAvailable", 40 * time.Second},
		{"progressing at the deadline", progress, time.Minute, ResultFailed, "DeadlineExceeded", 0},
		{"complete after the deadline still counts", Status{Phase: Complete}, time.Hour, ResultComplete, "", 0},
		{"failed by its own account", Status{Phase: Failed, Reason: "ProgressDeadlineExceeded"}, time.Second, ResultFailed, "ProgressDeadlineExceeded", 0},
		{"not rolling", Status{Phase: NotRolling, Reason: "Paused"}, time.Hour, ResultNotRolling, "Paused", 0},
		{"no status yet is progress", Status{}, 10 * time.Second, ResultPending, "", 50 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := rule.Judge(tc.status, start, start.Add(tc.at))
			if v.Result != tc.want || v.Reason != tc.reason || v.Wait != tc.wait {
				t.Fatalf("got %+v", v)
			}
		})
	}
	v := Rule{}.Judge(progress, start, start.Add(DefaultDeadline-time.Second))
	if v.Result != ResultPending || v.Wait != time.Second {
		t.Fatalf("default deadline: %+v", v)
	}
	v = rule.Judge(progress, start, start.Add(2*time.Minute))
	if !strings.Contains(v.Message, "1m0s") || !strings.Contains(v.Message, "available 1/2") {
		t.Fatalf("timeout message %q should say the deadline and the last status", v.Message)
	}
}
