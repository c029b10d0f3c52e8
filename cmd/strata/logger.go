package main

import (
	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// newLogger logs JSON lines with millisecond timestamps, as Flux's
// controllers do: events on a busy controller are milliseconds apart.
func newLogger() logr.Logger {
	return zap.New(func(o *zap.Options) { o.TimeEncoder = zapcore.ISO8601TimeEncoder })
}
