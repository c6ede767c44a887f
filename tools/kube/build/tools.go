//go:build tools

// Package tools records the main packages this helper module builds as its dependencies,
// so that `go mod tidy` keeps everything they need in go.mod and go.sum: the API server and
// kubectl, and the node side of the harness (tools/kube/node): kube-controller-manager,
// kube-scheduler and kubelet.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
