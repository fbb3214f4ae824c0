package stats

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The kubelet's resource metrics (/metrics/resource), the names
// metrics-server reads.
var (
	nodeCPUDesc       = prometheus.NewDesc("node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemDesc       = prometheus.NewDesc("node_memory_working_set_bytes", "Current working set of the node in bytes", nil, nil)
	containerCPUDesc  = prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemDesc  = prometheus.NewDesc("container_memory_working_set_bytes", "Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	containerStartDsc = prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	podCPUDesc        = prometheus.NewDesc("pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemDesc        = prometheus.NewDesc("pod_memory_working_set_bytes", "Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	scrapeErrorDesc   = prometheus.NewDesc("scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// resourceCollector reads the summary's CPU and memory for one scrape,
// within the scrape's request.
type resourceCollector struct {
	p   *Provider
	ctx context.Context
}

func (c resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemDesc, containerCPUDesc, containerMemDesc, containerStartDsc, podCPUDesc, podMemDesc, scrapeErrorDesc} {
		ch <- d
	}
}

// Collect emits each figure with the time it was read, as the kubelet
// (metrics-server computes rates from those times).
func (c resourceCollector) Collect(ch chan<- prometheus.Metric) {
	s, err := c.p.Summary(c.ctx, true)
	if err != nil {
		c.p.log.Warn("resource metrics", zap.Error(err))
		ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 0)
	cpuMem(ch, s.Node.CPU, s.Node.Memory, nodeCPUDesc, nodeMemDesc)
	for _, p := range s.Pods {
		cpuMem(ch, p.CPU, p.Memory, podCPUDesc, podMemDesc, p.PodRef.Name, p.PodRef.Namespace)
		for _, ct := range p.Containers {
			ch <- prometheus.NewMetricWithTimestamp(ct.StartTime.Time, prometheus.MustNewConstMetric(containerStartDsc, prometheus.GaugeValue,
				float64(ct.StartTime.UnixNano())/1e9, ct.Name, p.PodRef.Name, p.PodRef.Namespace))
			cpuMem(ch, ct.CPU, ct.Memory, containerCPUDesc, containerMemDesc, ct.Name, p.PodRef.Name, p.PodRef.Namespace)
		}
	}
}

func cpuMem(ch chan<- prometheus.Metric, c *statsapi.CPUStats, m *statsapi.MemoryStats, cpuDesc, memDesc *prometheus.Desc, labels ...string) {
	if c != nil && c.UsageCoreNanoSeconds != nil {
		ch <- prometheus.NewMetricWithTimestamp(c.Time.Time, prometheus.MustNewConstMetric(cpuDesc, prometheus.CounterValue,
			float64(*c.UsageCoreNanoSeconds)/1e9, labels...))
	}
	if m != nil && m.WorkingSetBytes != nil {
		ch <- prometheus.NewMetricWithTimestamp(m.Time.Time, prometheus.MustNewConstMetric(memDesc, prometheus.GaugeValue,
			float64(*m.WorkingSetBytes), labels...))
	}
}

// ResourceHandler serves the resource metrics in the Prometheus text
// format. Each scrape reads the figures within its own request: a
// scraper that gave up cancels the CRI calls made for it.
func (p *Provider) ResourceHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(resourceCollector{p: p, ctx: r.Context()})
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: zap.NewStdLog(p.log)}).ServeHTTP(w, r)
	})
}
