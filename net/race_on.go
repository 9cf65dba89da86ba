//go:build race

package net

// raceBuild turns on the exact (system-call) check of Loop.onLoop in race
// builds, where the cost does not matter and catching every misuse does.
const raceBuild = true
