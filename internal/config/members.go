package config

import "github.com/restart-controller/restart-controller/internal/refs"

// LifecycleUpdatesOnly is the sources[].lifecycle of a kind whose objects
// another controller creates and deletes with each pod: the CSI Secrets
// Store driver creates one SecretProviderClassPodStatus per pod and volume
// when the pod mounts it, and it goes away with the pod. A creation or a
// deletion of such an object is never a change (a restart would create new
// ones: a loop); only an update of one that existed is. Its objects are
// members of a source named by nameFrom (every pod's status object of one
// SecretProviderClass), and its data are items (refs.Members).
const LifecycleUpdatesOnly = "updatesOnly"

// compileMembers checks the fields of a source kind that depend on its
// lifecycle and returns its Members (nil for the default lifecycle).
func compileMembers(path string, k FileSourceKind, p *problems) *refs.Members {
	switch k.Lifecycle {
	case "":
		if k.NameFrom != "" {
			p.addf(path+".nameFrom", "only with lifecycle: %s", LifecycleUpdatesOnly)
		}
		if k.Items != (FileSourceItems{}) {
			p.addf(path+".items", "only with lifecycle: %s; a kind's data are its dataFields otherwise", LifecycleUpdatesOnly)
		}
		return nil
	case LifecycleUpdatesOnly:
	default:
		p.addf(path+".lifecycle", "must be empty or %q, got %q", LifecycleUpdatesOnly, k.Lifecycle)
		return nil
	}
	if len(k.DataFields) > 0 {
		p.addf(path+".dataFields", "must be left out with lifecycle: %s, whose data are its items", LifecycleUpdatesOnly)
	}
	m, err := refs.CompileMembers(k.NameFrom, k.Items.Path, k.Items.Key, k.Items.Value)
	if err != nil {
		addRefsErrors(p, path, err)
	}
	return m
}
