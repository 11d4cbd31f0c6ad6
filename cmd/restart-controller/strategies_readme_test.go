package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"maps"

	"github.com/restart-controller/restart-controller/internal/config"
)

// strategyWhy says why each default workload kind restarts the way it does;
// a default kind without a reason here fails the README test.
var strategyWhy = map[string]string{
	"deployments":  "the template change is the kind's own rollout: surge, readiness, progress deadline",
	"statefulsets": "as for Deployments, in ordinal order",
	"daemonsets":   "as for Deployments, node by node",
	"rollouts": "restarts as before by default; under GitOps a changed template is drift for Argo CD and may start a canary analysis, " +
		"so `restart` sets `spec.restartAt` instead: Argo Rollouts replaces the pods and leaves the template alone; complete when `status.restartedAt` equals it",
	"cronjobs": "a CronJob's next scheduled run reads the new data anyway, maybe hours away; what its owners opt in for is a run now, " +
		"as Reloader starts: one Job per change (named after it, so a retry never starts a second), ended by its Complete or Failed condition. " +
		"It costs `create` on Jobs (arbitrary pods): `restart: {strategy: templateAnnotation}` (and no Job rule) grants less",
}

// strategiesBlock is the README's table of the default restart strategies.
func strategiesBlock(t *testing.T) string {
	c, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("| kind | strategy | `" + c.Annotations.RestartStrategy + "` | why |\n|---|---|---|---|\n")
	for _, w := range c.Workloads {
		why, ok := strategyWhy[w.GVR.Resource]
		if !ok {
			t.Errorf("no reason for the restart strategy of %s (strategyWhy)", w.GVR.Resource)
		}
		var alts []string
		for _, v := range slices.Sorted(maps.Keys(w.Restart.ByAnnotation)) {
			alts = append(alts, fmt.Sprintf("`%s`: %s", v, w.Restart.ByAnnotation[v]))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", w.GVR.GroupResource(), w.Restart.Strategy, strings.Join(alts, "; "), why)
	}
	return b.String()
}
