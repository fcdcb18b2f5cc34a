package payloadserver

import (
	"log"
	"strings"

	"github.com/go-logr/logr"
)

// newServerErrorLog routes net/http's own messages to the structured log:
// a recovered panic as an error, the rest (TLS handshake failures of port
// scanners and of clients refused for their TLS version) at V(1).
func newServerErrorLog(l logr.Logger) *log.Logger {
	return log.New(logWriter{l}, "", 0)
}

type logWriter struct{ l logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "panic") {
		w.l.Error(nil, msg)
	} else {
		w.l.V(1).Info(msg)
	}
	return len(p), nil
}
