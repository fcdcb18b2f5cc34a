package process

import (
	"errors"
	"fmt"
	"os/exec"
)

// Build builds the nodepool binary (./cmd/nodepool of the checkout at root)
// to path.
func Build(root, path string) error {
	cmd := exec.Command("go", "build", "-o", path, "./cmd/nodepool")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/nodepool: %w\n%s", err, out)
	}
	return nil
}

// BuildWhile builds the nodepool binary (Build) while start runs (say, the
// control plane starting), and returns when both have: with their errors.
func BuildWhile(root, path string, start func() error) error {
	built := make(chan error, 1)
	go func() { built <- Build(root, path) }()
	err := start()
	return errors.Join(<-built, err)
}
