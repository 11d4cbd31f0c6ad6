package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The shim reads helm's command line as Reloader's suites write it
// (test/e2e/utils/helm.go at v1.4.21).
func TestParseHelm(t *testing.T) {
	h, err := parseHelm([]string{"upgrade", "--install", "rel", "/src/chart", "--namespace", "ns", "--create-namespace",
		"--reset-values", "--set", "image.tag=test", "--set=reloader.watchGlobally=false", "--wait", "--timeout", "180s"})
	if err != nil {
		t.Fatal(err)
	}
	want := helmArgs{verb: "upgrade", release: "rel", namespace: "ns", sets: []string{"image.tag=test", "reloader.watchGlobally=false"}, timeout: 180 * time.Second}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("got %+v, want %+v", h, want)
	}
	h, err = parseHelm([]string{"uninstall", "rel", "--namespace=ns", "--ignore-not-found", "--wait"})
	if err != nil || h.verb != "uninstall" || h.release != "rel" || h.namespace != "ns" {
		t.Errorf("uninstall: %+v, %v", h, err)
	}
	if _, err := parseHelm([]string{"version"}); err == nil {
		t.Error("a command without a release was accepted")
	}
}

func TestReportSummary(t *testing.T) {
	report := `[{"SpecReports":[
	 {"ContainerHierarchyTexts":["Deployment"],"LeafNodeText":"reloads","LeafNodeType":"It","State":"passed"},
	 {"ContainerHierarchyTexts":["CronJob"],"LeafNodeText":"runs a job","LeafNodeType":"It","State":"failed","Failure":{"Message":"timed out\nmore"}},
	 {"ContainerHierarchyTexts":["Argo"],"LeafNodeText":"restartAt","LeafNodeType":"It","State":"skipped"},
	 {"ContainerHierarchyTexts":["StatefulSet"],"LeafNodeText":"reloads","LeafNodeType":"It","State":"passed","NumAttempts":2},
	 {"LeafNodeText":"","LeafNodeType":"SynchronizedBeforeSuite","State":"passed"}]}]`
	path := filepath.Join(t.TempDir(), "core.json")
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	r := suiteResult{name: "core", counts: map[string]int{}}
	if err := readReport(path, &r); err != nil {
		t.Fatal(err)
	}
	got := summarize([]suiteResult{r})
	for _, want := range []string{"| core | 2 | 1 | 1 | 1 |", "- CronJob runs a job: timed out\n", "passed on a retry:\n- StatefulSet reloads\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

// The DeploymentConfig stand-in rolls a new generation out as the next
// version when a ConfigChange trigger asks for it, or for the first
// rollout; without one the version stays, and the generation is observed.
func TestDeploymentConfigStandIn(t *testing.T) {
	dc := func(version int64, triggers ...interface{}) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{
			"metadata": map[string]interface{}{"name": "web", "generation": int64(3)},
			"spec":     map[string]interface{}{"replicas": int64(2), "triggers": triggers},
			"status":   map[string]interface{}{"latestVersion": version, "observedGeneration": int64(2)},
		}}
		return u
	}
	configChange := map[string]interface{}{"type": "ConfigChange"}
	for _, tc := range []struct {
		name string
		dc   *unstructured.Unstructured
		want int64
	}{
		{"ConfigChange trigger", dc(4, configChange), 5},
		{"no trigger", dc(4), 4},
		{"first rollout", dc(0), 1},
	} {
		s := rolledOut(tc.dc)
		if s["latestVersion"] != tc.want || s["observedGeneration"] != int64(3) || s["readyReplicas"] != int64(2) {
			t.Errorf("%s: status %v, want version %d at generation 3 with 2 ready", tc.name, s, tc.want)
		}
	}
}
