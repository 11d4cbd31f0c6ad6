package migrate

// The CSI Secrets Store driver's source kind, as examples/config.yaml shows
// it (commented out there and in the Reloader preset: its CRD may not be
// installed, and Reloader watches it only with --enable-csi-integration).
const csiSource = "secretproviderclasspodstatus"

// csi adds, for --enable-csi-integration, the CSI driver's
// SecretProviderClassPodStatuses as a source kind of lifecycle updatesOnly,
// the pod spec's csi volumes as references to it, and Reloader's
// secretproviderclass annotations: auto, reload (a regex list, as for
// ConfigMaps) and exclude. reloader.stakater.com/auto covers it already
// (an opt-in of every kind), as in Reloader.
func (m *mapping) csi(o Options) {
	if !o.EnableCSIIntegration {
		return
	}
	m.appendEntry("sources", map[string]any{
		"name": csiSource, "group": "secrets-store.csi.x-k8s.io", "version": "v1", "resource": "secretproviderclasspodstatuses",
		"lifecycle": "updatesOnly", "nameFrom": "status.secretProviderClassName",
		"items": map[string]any{"path": "status.objects[*]", "key": "id", "value": "version"},
		// Reloader's env-vars name: STAKATER_<NAME>_SECRETPROVIDERCLASS.
		"envVarKind": "SECRETPROVIDERCLASS",
	})
	m.appendEntry("references", map[string]any{
		"source": csiSource, "from": []any{"volumes[*].csi"}, "name": "volumeAttributes.secretProviderClass",
	})
	// Reloader has no flags renaming these.
	m.appendEntry("optInAnnotations", map[string]any{"annotation": "secretproviderclass.reloader.stakater.com/auto",
		"sources": []any{csiSource}, "parseBool": true, "optOut": true, "readFrom": "both"})
	m.appendEntry("sourceListAnnotations", map[string]any{"annotation": "secretproviderclass.reloader.stakater.com/reload",
		"source": csiSource, "optIn": true, "readFrom": "both", "match": "regex"})
	m.appendEntry("excludeAnnotations", map[string]any{"annotation": "secretproviderclasses.exclude.reloader.stakater.com/reload", "source": csiSource})
	m.differs("--enable-csi-integration", "a SecretProviderClassPodStatus's creation and deletion restart nothing, as in Reloader; "+
		"an update restarts only when the versions of the pod's objects changed, and the pods of one workload rotating one after the other make one restart; "+
		"its CRD is watched once it is installed (Reloader skips CSI when the CRD is missing at its start)")
}

// appendEntry appends an entry to the tree's list at key (current).
func (m *mapping) appendEntry(key string, e map[string]any) {
	m.tree[key] = append(m.current(key), e)
}
