package testcluster

import "k8s.io/apimachinery/pkg/runtime/schema"

// DeploymentConfigCRD serves OpenShift's DeploymentConfigs, which the local
// cluster has no API for, to the end-to-end tests and hack/reloader-e2e:
// the status subresource the real API has, so that status writes do not
// raise the generation, and no schema (the controller and Reloader's suites
// read only the fields the tests and the stand-in write). Its kind is what
// Reloader's suites' discovery looks for (utils.HasDeploymentConfigSupport).
const DeploymentConfigCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: deploymentconfigs.apps.openshift.io}
spec:
  group: apps.openshift.io
  scope: Namespaced
  names: {plural: deploymentconfigs, singular: deploymentconfig, kind: DeploymentConfig, listKind: DeploymentConfigList, shortNames: [dc]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// DeploymentConfigs is the resource DeploymentConfigCRD serves.
var DeploymentConfigs = schema.GroupVersionResource{Group: "apps.openshift.io", Version: "v1", Resource: "deploymentconfigs"}
