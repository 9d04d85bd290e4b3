//go:build tools

// Package tools pins the KWOK controller the envelope benchmark runs its nodes and pods with.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
