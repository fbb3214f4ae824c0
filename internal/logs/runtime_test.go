package logs_test

import (
	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/logs"
)

// The agent's CRI connection is what the manager rotates through.
var _ logs.Runtime = (*cri.Conn)(nil)
