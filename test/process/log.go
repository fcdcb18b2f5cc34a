package process

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"

	"nodepool.dev/nodepool/test/harness"
)

// A LogBuffer keeps a process's output, and copies it to stderr, each line
// after [Prefix], when NODEPOOL_TEST_LOG is set.
type LogBuffer struct {
	Prefix string
	mu     sync.Mutex
	buf    bytes.Buffer
}

// Write keeps p (and copies it to stderr when NODEPOOL_TEST_LOG is set).
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if os.Getenv(harness.LogEnv) != "" {
		for _, l := range strings.SplitAfter(string(p), "\n") {
			if l != "" {
				fmt.Fprintf(os.Stderr, "[%s] %s", b.Prefix, l)
			}
		}
	}
	return b.buf.Write(p)
}

// Find returns the first line holding s, or "".
func (b *LogBuffer) Find(s string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// Tail returns the last n lines.
func (b *LogBuffer) Tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimRight(b.buf.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
