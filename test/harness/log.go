package harness

import (
	"os"
	"strconv"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogEnv names the variable that turns on controller logs in tests: a zap
// level number (0 info, -2 verbose, 2 errors only). Unset, controllers log
// nothing, because the Cluster API controllers report expected conflicts
// of every rollout as errors and drown the test output.
const LogEnv = "NODEPOOL_TEST_LOG"

func testLogger() logr.Logger {
	v, err := strconv.Atoi(os.Getenv(LogEnv))
	if err != nil {
		return logr.Discard()
	}
	return zap.New(zap.UseDevMode(false), zap.Level(zapcore.Level(v)), zap.WriteTo(os.Stderr))
}
