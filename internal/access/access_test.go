package access

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/config"
)

func parse(t *testing.T, file string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grants renders needs as "NAMESPACE RESOURCE.GROUP[/NAME]: VERBS", sorted.
func grants(needs []Need) []string {
	var out []string
	for _, n := range needs {
		g := fmt.Sprintf("%s %s", n.Namespace, n.Resource)
		if n.Name != "" {
			g += "/" + n.Name
		}
		out = append(out, g+": "+strings.Join(n.Verbs, ","))
	}
	slices.Sort(out)
	return out
}

// The controller asks to read each notification sink's URL Secret by name,
// once per Secret, in its own namespace.
func TestNeedsReadSinkSecretsOnce(t *testing.T) {
	c := parse(t, `
notifications:
  sinks:
    - {name: chat, type: slack, urlSecret: {name: notify, key: slack}, send: [hold]}
    - {name: audit, type: webhook, urlSecret: {name: notify, key: audit}}
`)
	c.Settings.LeaseNamespace = "ops"
	var reads []Need
	for _, n := range Needs(c) {
		if n.Resource == (schema.GroupResource{Resource: "secrets"}) && slices.Equal(n.Verbs, NotifySecretVerbs()) {
			reads = append(reads, n)
		}
	}
	if len(reads) != 1 || reads[0].Name != "notify" || reads[0].Namespace != "ops" {
		t.Errorf("needs to read the sinks' Secret: %+v, want one get of ops/notify", reads)
	}
}

// Every kind is listed and watched in each watched namespace; workloads
// are patched; only the strategies that need more get more: runNow (CronJobs
// by default) reads its CronJobs whole and creates and reads Jobs, recreate
// deletes and creates its kind, envVar (here picked by annotation) reads
// its kind whole; the checksum key Secret is the one Secret
// read, and the Lease is asked for only with leader election.
func TestNeedsFollowTheConfiguration(t *testing.T) {
	c := parse(t, `
namespaces: [a, b]
workloads:
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template}
- {group: batch, version: v1, resource: cronjobs, podTemplatePath: spec.jobTemplate.spec.template, restart: {strategy: runNow}}
- {group: batch, version: v1, resource: jobs, podTemplatePath: spec.template, restart: {strategy: recreate}}
- {group: apps, version: v1, resource: statefulsets, podTemplatePath: spec.template,
   restart: {byAnnotation: [{value: env-vars, strategy: envVar}]}}
`)
	c.Settings.LeaderElect = false
	got := grants(Needs(c))
	for _, ns := range []string{"a", "b"} {
		for _, want := range []string{
			ns + " configmaps: list,watch", ns + " secrets: list,watch",
			ns + " deployments.apps: list,watch,patch",
			ns + " cronjobs.batch: list,watch,patch", ns + " cronjobs.batch: get", ns + " jobs.batch: create,get",
			ns + " jobs.batch: list,watch,patch", ns + " jobs.batch: get", ns + " jobs.batch: delete,create",
			ns + " statefulsets.apps: list,watch,patch", ns + " statefulsets.apps: get",
			ns + " events.events.k8s.io: create,patch",
		} {
			if !slices.Contains(got, want) {
				t.Errorf("no grant %q in\n%s", want, strings.Join(got, "\n"))
			}
		}
	}
	for _, g := range got {
		if strings.HasPrefix(g, "a deployments.apps") && g != "a deployments.apps: list,watch,patch" {
			t.Errorf("a patched kind needs more: %q", g)
		}
		if strings.Contains(g, "leases") {
			t.Errorf("a Lease without leader election: %q", g)
		}
	}
	if want := c.Settings.LeaseNamespace + " secrets/" + c.Settings.ChecksumKeySecret + ": get,create"; !slices.Contains(got, want) {
		t.Errorf("no grant %q in\n%s", want, strings.Join(got, "\n"))
	}
	c.Settings.LeaderElect = true
	if got := grants(Needs(c)); !slices.Contains(got, c.Settings.LeaseNamespace+" leases.coordination.k8s.io: get,create,update") {
		t.Errorf("no Lease with leader election:\n%s", strings.Join(got, "\n"))
	}
}

// Namespaces are read (list, watch, across the cluster) only for a
// namespaceSelector; ignoredNamespaces and a sourceSelector need nothing
// more than the informers' verbs.
func TestNeedsNamespacesOnlyForASelector(t *testing.T) {
	for _, tc := range []struct {
		file string
		want bool
	}{
		{"", false},
		{"ignoredNamespaces: [kube-system]\nsourceSelector: reload=true", false},
		{"namespaceSelector: env=prod", true},
		{"namespaces: [a]\nnamespaceSelector: env=prod", true},
	} {
		cfg := parse(t, tc.file)
		i := slices.IndexFunc(Needs(cfg), func(n Need) bool { return n.Resource.Resource == "namespaces" })
		if (i >= 0) != tc.want {
			t.Errorf("%q: needs namespaces %v, want %v", tc.file, i >= 0, tc.want)
			continue
		}
		if n := Needs(cfg); i >= 0 && (n[i].Namespace != "" || !slices.Equal(n[i].Verbs, []string{"list", "watch"})) {
			t.Errorf("%q: %+v, want list and watch across the cluster", tc.file, n[i])
		}
	}
}
