package config

import (
	"slices"
	"testing"
)

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
		cfg, err := Parse([]byte(tc.file))
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(cfg.Needs(), func(n Need) bool { return n.Resource.Resource == "namespaces" })
		if (i >= 0) != tc.want {
			t.Errorf("%q: needs namespaces %v, want %v", tc.file, i >= 0, tc.want)
			continue
		}
		if n := cfg.Needs(); i >= 0 && (n[i].Namespace != "" || !slices.Equal(n[i].Verbs, []string{"list", "watch"})) {
			t.Errorf("%q: %+v, want list and watch across the cluster", tc.file, n[i])
		}
	}
}

// The ignored namespaces are a field selector only when every namespace is
// watched; with namespaces listed there is nothing to leave out.
func TestIgnoredNamespacesField(t *testing.T) {
	cfg, err := Parse([]byte("ignoredNamespaces: [a, b]"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.IgnoredNamespacesField(), "metadata.namespace!=a,metadata.namespace!=b"; got != want {
		t.Errorf("field selector %q, want %q", got, want)
	}
	if !cfg.NamespaceIgnored("a") || cfg.NamespaceIgnored("c") {
		t.Error("NamespaceIgnored")
	}
	if cfg, err = Parse([]byte("namespaces: [c]\nignoredNamespaces: [a]")); err != nil {
		t.Fatal(err)
	}
	if got := cfg.IgnoredNamespacesField(); got != "" {
		t.Errorf("with namespaces: field selector %q", got)
	}
}
