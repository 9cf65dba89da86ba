//go:build !race

package net

// raceBuild: see race_on.go.
const raceBuild = false
