//go:build !linux

package testenv

// landlockABI is 0: Landlock is Linux's.
func landlockABI() int { return 0 }
