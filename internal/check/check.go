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
	"sort"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/scheme"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/restart-controller/restart-controller/internal/access"
	"github.com/restart-controller/restart-controller/internal/config"
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

// Served checks with discovery that every configured kind is served. A
// source kind must be: the controller does not start without it, except
// one of lifecycle updatesOnly, which is watched once its CRD appears, as
// a workload kind of another group is. A missing
// workload kind of a built-in group (apps, batch, ..., or a group no CRD may
// use) is an error, a typo; one of another group is a warning: its CRD may be installed later,
// and the controller watches it once it appears.
func Served(disc discovery.DiscoveryInterface, cfg *config.Config) []Result {
	var out []Result
	check := func(gvr schema.GroupVersionResource, required bool) {
		name := fmt.Sprintf("%s (%s) served", gvr.GroupResource(), gvr.Version)
		found, hint, err := served(disc, gvr)
		switch {
		case err != nil:
			out = append(out, Result{LevelError, name, "discovery failed: " + err.Error()})
		case found:
			out = append(out, Result{LevelOK, name, "yes"})
		case required:
			out = append(out, Result{LevelError, name, "not served, and the controller cannot start without its source kinds; " + hint})
		case builtIn(gvr.Group):
			out = append(out, Result{LevelError, name, "not served, and no CRD can add it to this group: a typo? " + hint})
		default:
			out = append(out, Result{LevelWarning, name, "not served (CRD not installed?); the controller watches it once it appears; " + hint})
		}
	}
	for _, s := range cfg.Sources {
		check(s.GVR, s.Members == nil)
	}
	for _, w := range cfg.Workloads {
		check(w.GVR, false)
	}
	return out
}

// builtIn reports whether only Kubernetes itself serves a group: one that
// client-go knows (apps, batch, ...), or one without a dot, which no CRD may
// use. A group of CRDs may be installed later.
func builtIn(group string) bool {
	return scheme.Scheme.IsGroupRegistered(group) || !strings.Contains(group, ".")
}

// served looks the resource up; when it is not served, hint says what is.
func served(disc discovery.DiscoveryInterface, gvr schema.GroupVersionResource) (found bool, hint string, err error) {
	gv := gvr.GroupVersion().String()
	list, err := disc.ServerResourcesForGroupVersion(gv)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, "", err
	default:
		var names []string
		for _, r := range list.APIResources {
			if r.Name == gvr.Resource {
				return true, "", nil
			}
			if !strings.Contains(r.Name, "/") {
				names = append(names, r.Name)
			}
		}
		sort.Strings(names)
		return false, fmt.Sprintf("%s serves: %s", gv, strings.Join(names, ", ")), nil
	}
	groups, err := disc.ServerGroups()
	if err != nil {
		return false, "", err
	}
	for _, g := range groups.Groups {
		if g.Name == gvr.Group {
			var versions []string
			for _, v := range g.Versions {
				versions = append(versions, v.Version)
			}
			return false, fmt.Sprintf("group %q is served in version(s) %s", groupName(gvr.Group), strings.Join(versions, ", ")), nil
		}
	}
	return false, fmt.Sprintf("no group %q is served", groupName(gvr.Group)), nil
}

func groupName(g string) string {
	if g == "" {
		return "core"
	}
	return g
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
