package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Devices are the kubelet's device plugin and pod resources API
// metrics: kubelet_device_plugin_registration_total{resource_name},
// kubelet_device_plugin_alloc_duration_seconds{resource_name} and
// kubelet_pod_resources_endpoint_requests_{total,list,get_allocatable,get}{server_api_version}.
type Devices struct {
	registrations *prometheus.CounterVec
	allocations   *prometheus.HistogramVec
	requests      map[string]*prometheus.CounterVec // "" (total), list, get_allocatable, get
}

func newDevices() *Devices {
	d := &Devices{
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubelet_device_plugin_registration_total",
			Help: "Cumulative number of device plugin registrations. Broken down by resource name."}, []string{"resource_name"}),
		allocations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kubelet_device_plugin_alloc_duration_seconds",
			Help: "Duration in seconds to serve a device plugin Allocation request. Broken down by resource name.", Buckets: prometheus.DefBuckets},
			[]string{"resource_name"}),
		requests: map[string]*prometheus.CounterVec{},
	}
	for key, help := range map[string]string{
		"total":           "Cumulative number of requests to the PodResource endpoint. Broken down by server api version.",
		"list":            "Number of requests to the PodResource List endpoint. Broken down by server api version.",
		"get_allocatable": "Number of requests to the PodResource GetAllocatableResources endpoint. Broken down by server api version.",
		"get":             "Number of requests to the PodResource Get endpoint. Broken down by server api version.",
	} {
		d.requests[key] = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubelet_pod_resources_endpoint_requests_" + key, Help: help},
			[]string{"server_api_version"})
	}
	return d
}

func (d *Devices) collectors() []prometheus.Collector {
	out := []prometheus.Collector{d.registrations, d.allocations}
	for _, c := range d.requests {
		out = append(out, c)
	}
	return out
}

// Registered counts a device plugin's registration request.
func (d *Devices) Registered(resource string) { d.registrations.WithLabelValues(resource).Inc() }

// Allocated records how long a plugin took to answer an Allocate.
func (d *Devices) Allocated(resource string, took time.Duration) {
	d.allocations.WithLabelValues(resource).Observe(took.Seconds())
}

// PodResourcesRequest counts a v1 pod resources API call: method is
// list, get_allocatable or get.
func (d *Devices) PodResourcesRequest(method string) {
	d.requests["total"].WithLabelValues("v1").Inc()
	if c := d.requests[method]; c != nil {
		c.WithLabelValues("v1").Inc()
	}
}
