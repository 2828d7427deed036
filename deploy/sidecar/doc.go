// Package sidecar holds no code: this directory is how obol is deployed
// beside application pods, and the tests that run those deployment files
// for real.
//
// The container image is built by build-image from Containerfile (a static
// agent on scratch, user 65532, the socket in /run/obol). TestPodsFromImage
// (pods_test.go; the machine in world_test.go, the pods in pod_test.go)
// builds that image with podman, exports its root filesystem and runs the
// agent from it in three "pods" (network namespaces on a bridge, each with
// its own mount namespace, a read-only root and a socket directory shared
// with the "app", which is the test), with the flags the Kubernetes
// manifests give it and a headless-Service-like DNS name to join. It needs
// root, podman, util-linux's unshare and iproute2, and skips without them.
package sidecar
