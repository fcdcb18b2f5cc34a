//go:build !unix

package devenv

// lockDataDir does not lock on this platform.
func lockDataDir(string) (func(), error) { return func() {}, nil }
