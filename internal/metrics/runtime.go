package metrics

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// runtimeOps are the kubelet's remote runtime metrics
// (pkg/kubelet/kuberuntime/instrumented_services.go), fed here by gRPC
// client interceptors on the CRI connection instead of a wrapper per
// method: every call the agent makes is counted, whichever package makes
// it.
type runtimeOps struct {
	total    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newRuntimeOps() runtimeOps {
	return runtimeOps{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubelet_runtime_operations_total", Help: "Cumulative number of runtime operations by operation type.",
		}, []string{"operation_type"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubelet_runtime_operations_errors_total", Help: "Cumulative number of runtime operation errors by operation type.",
		}, []string{"operation_type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubelet_runtime_operations_duration_seconds", Help: "Duration in seconds of runtime operations. Broken down by operation type.",
			Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14),
		}, []string{"operation_type"}),
	}
}

// DialOptions are the CRI connection's interceptors (cri.Dial's extra
// options).
func (m *Metrics) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(m.UnaryClientInterceptor),
		grpc.WithChainStreamInterceptor(m.StreamClientInterceptor),
	}
}

// UnaryClientInterceptor counts and times one CRI call; any error counts
// (NotFound too, as the kubelet's).
func (m *Metrics) UnaryClientInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := m.clock.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	m.record(Operation(method), start, err)
	return err
}

// StreamClientInterceptor counts and times one streaming CRI call
// (GetContainerEvents) over its whole life, as the kubelet's
// instrumented GetContainerEvents: it ends when a receive fails or the
// caller's context ends. A failure to open it, or an end other than
// io.EOF while the caller still wanted it, is an error; the caller
// cancelling it is not.
func (m *Metrics) StreamClientInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	op, start := Operation(method), m.clock.Now()
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		m.record(op, start, err)
		return nil, err
	}
	s := &measuredStream{ClientStream: cs, ctx: ctx, end: func(err error) { m.record(op, start, err) }}
	s.stop = context.AfterFunc(ctx, func() { s.finish(nil) })
	return s, nil
}

func (m *Metrics) record(op string, start time.Time, err error) {
	m.ops.total.WithLabelValues(op).Inc()
	m.ops.duration.WithLabelValues(op).Observe(m.clock.Since(start).Seconds())
	if err != nil {
		m.ops.errors.WithLabelValues(op).Inc()
	}
}

// measuredStream records its call once, when it ends.
type measuredStream struct {
	grpc.ClientStream
	ctx  context.Context
	stop func() bool
	end  func(error)
	once sync.Once
}

func (s *measuredStream) RecvMsg(msg any) error {
	err := s.ClientStream.RecvMsg(msg)
	if err != nil {
		s.stop()
		if errors.Is(err, io.EOF) || s.ctx.Err() != nil {
			s.finish(nil)
		} else {
			s.finish(err)
		}
	}
	return err
}

func (s *measuredStream) finish(err error) { s.once.Do(func() { s.end(err) }) }

// operationNames are the kubelet's names that do not follow from the
// method name.
var operationNames = map[string]string{
	"UpdateContainerResources": "update_container",
}

// Operation is the kubelet's operation_type of a CRI method
// ("/runtime.v1.RuntimeService/RunPodSandbox" → "run_podsandbox"): the
// method's name in snake case, "pod_sandbox" written "podsandbox".
func Operation(fullMethod string) string {
	name := fullMethod[strings.LastIndex(fullMethod, "/")+1:]
	if op, ok := operationNames[name]; ok {
		return op
	}
	var b strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			// A word starts at an upper-case letter after a lower-case one
			// or a digit, or at the last capital of an acronym.
			if i > 0 && (!unicode.IsUpper(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return strings.ReplaceAll(b.String(), "pod_sandbox", "podsandbox")
}
