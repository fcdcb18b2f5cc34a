package process

import (
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
