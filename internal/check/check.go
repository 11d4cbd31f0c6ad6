// Package check validates the controller's configuration before it is
// deployed: the config file (exactly as the controller loads it), and, when
// a cluster is reachable, that every configured kind is served and that the
// controller's ServiceAccount holds every permission the controller uses,
// asked of the API server with SubjectAccessReviews, and which other
// restart controllers' annotations the watched workloads carry that the
// config does not read (peers.go).
package check

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/restart-controller/restart-controller/internal/access"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/watch"
)

// Result levels.
const (
	LevelOK      = "ok"
	LevelWarning = "warning"
	LevelError   = "error"
)

// Result is the outcome of one check.
type Result struct {
	Level  string `json:"level"`
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

// Report is everything check found.
type Report struct {
	Config  string  `json:"config"`
	Watches Watches `json:"watches"`
	// Cluster is the API server checked; empty when none was.
	Cluster string `json:"cluster,omitempty"`
	// Subject is the user the permissions were checked for.
	Subject string `json:"subject,omitempty"`
	// Note says why the cluster was not checked.
	Note    string   `json:"note,omitempty"`
	Results []Result `json:"results"`
}

// Failed reports whether a check failed.
func (r *Report) Failed() bool {
	return slices.ContainsFunc(r.Results, func(x Result) bool { return x.Level == LevelError })
}

// Watches is what the controller would watch and write with a config.
type Watches struct {
	Sources          []string `json:"sources"`
	Workloads        []string `json:"workloads"`
	Namespaces       []string `json:"namespaces"` // empty: all
	WorkloadSelector string   `json:"workloadSelector"`
	// OptIn lists the workload annotations that opt it in or add sources.
	OptIn          []string `json:"optIn"`
	Writes         []string `json:"writes"`
	GracePeriod    string   `json:"gracePeriod"`
	LeaderElection string   `json:"leaderElection"`
	ReferenceForms int      `json:"referenceForms"`
}

// Describe says what the controller would watch and write with cfg.
func Describe(cfg *config.Config) Watches {
	w := Watches{
		Namespaces:       append([]string{}, cfg.Namespaces...),
		WorkloadSelector: cfg.WorkloadSelector.String(),
		OptIn:            cfg.OptInRules().Descriptions(),
		Writes: []string{
			cfg.Annotations.AppliedChecksums + " (workload annotation)",
			cfg.Annotations.AppliedTemplateHash + " (workload annotation)",
			cfg.Annotations.RestartTimestamp + " (pod template annotation; changing it restarts)",
		},
		GracePeriod:    cfg.Settings.GracePeriod.String(),
		LeaderElection: "off",
		ReferenceForms: len(cfg.Extractors),
	}
	for _, s := range cfg.Sources {
		if s.Members != nil {
			w.Sources = append(w.Sources, fmt.Sprintf("%s (%s) as %q, members of the source named by %s, lifecycle %s",
				s.GVR.GroupResource(), s.GVR.Version, s.Name, s.Members.NameFrom(), config.LifecycleUpdatesOnly))
			continue
		}
		w.Sources = append(w.Sources, fmt.Sprintf("%s (%s) as %q, keys in %s", s.GVR.GroupResource(), s.GVR.Version,
			s.Name, strings.Join(s.DataFields, ", ")))
	}
	for _, k := range cfg.Workloads {
		line := fmt.Sprintf("%s (%s), pod template at %s", k.GVR.GroupResource(), k.GVR.Version, k.PodTemplatePath)
		if name := k.Restart.Strategy.Name; name != config.TemplateAnnotation || len(k.Restart.ByAnnotation) > 0 {
			line += ", restarted by " + k.Restart.Strategy.String()
			for _, v := range slices.Sorted(maps.Keys(k.Restart.ByAnnotation)) {
				line += fmt.Sprintf("; %s=%s: %s", cfg.Annotations.RestartStrategy, v, k.Restart.ByAnnotation[v].Name)
			}
		}
		w.Workloads = append(w.Workloads, line)
	}
	if cfg.Settings.LeaderElect {
		w.LeaderElection = fmt.Sprintf("on, Lease %s/%s", cfg.Settings.LeaseNamespace, cfg.Settings.LeaseName)
	}
	return w
}

// Served checks with discovery that every configured kind is served, and
// judges one that is not as the controller does at start, with its rule
// (watch.LookUp, Lookup.Misspelled, watch.NeededAtStart): an error exactly
// where the controller would not start, a warning where it starts and
// watches the kind once it is served. It does not start with a resource
// that a served built-in group-version does not serve (a typo), nor without
// a source kind, except one of lifecycle updatesOnly. A discovery error is
// an error too: the kind could not be checked.
func Served(disc discovery.DiscoveryInterface, cfg *config.Config) []Result {
	var out []Result
	check := func(gvr schema.GroupVersionResource, required bool) {
		name := fmt.Sprintf("%s (%s) served", gvr.GroupResource(), gvr.Version)
		found, err := watch.LookUp(disc, gvr)
		var hint string
		if err == nil && found.Resource == nil {
			hint, err = servedHint(disc, gvr, found)
		}
		problem := found.Misspelled(gvr)
		switch {
		case err != nil:
			out = append(out, Result{LevelError, name, "discovery failed: " + err.Error()})
		case found.Resource != nil:
			out = append(out, Result{LevelOK, name, "yes"})
		case problem != "":
			out = append(out, Result{LevelError, name, "the controller does not start (a configuration error): " + problem})
		case required:
			out = append(out, Result{LevelError, name, "not served, and the controller cannot start without its source kinds; " + hint})
		case watch.BuiltinGroup(gvr.Group):
			// The controller starts and waits for it; only a newer
			// kube-apiserver, or one serving more versions, can end the wait.
			out = append(out, Result{LevelWarning, name, "not served; kube-apiserver serves this group itself, no CRD can add it, " +
				"and the controller waits until it serves this version (a newer Kubernetes, --runtime-config): a typo? " + hint})
		case !strings.Contains(gvr.Group, "."):
			// No CRD may name a group without a dot, and kube-apiserver
			// serves none of that name: only an aggregated API could.
			out = append(out, Result{LevelWarning, name, "not served; no CRD can serve a group without a dot, " +
				"and the controller waits until an aggregated API serves it: a typo? " + hint})
		default:
			out = append(out, Result{LevelWarning, name, "not served (CRD not installed?); the controller watches it once it appears; " + hint})
		}
	}
	for _, s := range cfg.Sources {
		check(s.GVR, watch.NeededAtStart(s))
	}
	for _, w := range cfg.Workloads {
		check(w.GVR, false)
	}
	return out
}

// servedHint says what is served instead of a resource that is not: the
// resources of its group-version, or else the versions of its group.
func servedHint(disc discovery.DiscoveryInterface, gvr schema.GroupVersionResource, found watch.Lookup) (string, error) {
	if found.GroupVersionServed {
		return fmt.Sprintf("%s serves: %s", gvr.GroupVersion(), strings.Join(found.Served, ", ")), nil
	}
	groups, err := disc.ServerGroups()
	if err != nil {
		return "", fmt.Errorf("listing the served groups: %w", err)
	}
	group := gvr.Group
	if group == "" {
		group = "core"
	}
	for _, g := range groups.Groups {
		if g.Name == gvr.Group {
			var versions []string
			for _, v := range g.Versions {
				versions = append(versions, v.Version)
			}
			return fmt.Sprintf("group %q is served in version(s) %s", group, strings.Join(versions, ", ")), nil
		}
	}
	return fmt.Sprintf("no group %q is served", group), nil
}

// ServiceAccountUser returns the user name and groups the API server gives
// a ServiceAccount's tokens.
func ServiceAccountUser(namespace, name string) (string, []string) {
	return "system:serviceaccount:" + namespace + ":" + name,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
}

// RBAC asks the API server, with SubjectAccessReviews, whether user may do
// everything in needs: one result per need, naming the verbs missing.
func RBAC(ctx context.Context, reviews authorizationclient.SubjectAccessReviewInterface, user string, groups []string, needs []access.Need) []Result {
	var out []Result
	for _, n := range needs {
		scope := "all namespaces"
		if n.Namespace != "" {
			scope = "namespace " + n.Namespace
		}
		name := "permissions on " + n.Resource.String()
		var allowed, denied []string
		for _, verb := range n.Verbs {
			review, err := reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: n.Namespace, Verb: verb, Group: n.Resource.Group, Resource: n.Resource.Resource,
					Name: nameFor(n, verb),
				},
			}}, metav1.CreateOptions{})
			if err != nil {
				return append(out, Result{LevelError, "permissions", "cannot ask the API server (a SubjectAccessReview): " + err.Error()})
			}
			if review.Status.Allowed {
				allowed = append(allowed, verb)
			} else {
				denied = append(denied, verb)
			}
		}
		if len(denied) == 0 {
			out = append(out, Result{LevelOK, name, fmt.Sprintf("%s (%s; %s)", strings.Join(allowed, ", "), scope, n.Why)})
			continue
		}
		detail := fmt.Sprintf("missing %s (%s; %s)", strings.Join(denied, ", "), scope, n.Why)
		if len(allowed) > 0 {
			detail += "; has " + strings.Join(allowed, ", ")
		}
		out = append(out, Result{LevelError, name, detail})
	}
	return out
}

// nameFor is the object name a review asks about: create names no object
// (the API server does not know it before the object exists).
func nameFor(n access.Need, verb string) string {
	if verb == "create" {
		return ""
	}
	return n.Name
}
