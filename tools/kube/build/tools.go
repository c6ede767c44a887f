//go:build tools

// Package tools records the kube-apiserver main package as a dependency of this helper
// module, so that `go mod tidy` keeps everything it needs in go.mod and go.sum.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
