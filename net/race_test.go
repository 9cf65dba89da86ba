//go:build race

package net

const raceEnabled = true
