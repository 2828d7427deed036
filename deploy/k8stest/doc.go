// Package k8stest checks what deploy/sidecar ships for Kubernetes and
// Grafana, in a module of its own so that the Kubernetes API types, kustomize
// and Helm stay out of the agent's module. Its tests build the kustomization
// with kustomize's own library (what kubectl apply -k runs) and render the
// Helm chart with Helm's own library (what helm install runs), decode every
// object strictly into the official API types (an unknown or misspelt field
// fails), check the sidecar's invariants on both with the same rules
// (checks_test.go), compare the chart's default render with the base, try
// the chart's values, run the real agent's --check-config with each
// Deployment's flags, check the Grafana dashboard's queries against the
// metrics a real pair of agents exports, and check that the READMEs' and
// the chart's NOTES.txt's kubectl commands name what the manifests define
// and that the chart's README documents every value.
//
// Run them from this directory: go test ./...
package k8stest
