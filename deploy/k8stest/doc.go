// Package k8stest checks what deploy/sidecar ships for Kubernetes and
// Grafana, in a module of its own so that the Kubernetes API types stay out
// of the agent's module. Its tests build the kustomization with kustomize's
// own library (what kubectl apply -k runs), decode every object strictly
// into the official API types (an unknown or misspelt field fails), check
// the sidecar's invariants, run the real agent's --check-config with the
// Deployment's flags, check the Grafana dashboard's queries against the
// metrics a real pair of agents exports, and check that the READMEs'
// kubectl commands name what the manifests define.
//
// Run them from this directory: go test ./...
package k8stest
