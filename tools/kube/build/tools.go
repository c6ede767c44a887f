//go:build tools

// Package tools records the kube-apiserver and kubectl main packages as dependencies of
// this helper module, so that `go mod tidy` keeps everything they need in go.mod and go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
