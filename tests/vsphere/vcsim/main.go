// Command vioconform-vcsim is govmomi's vCenter simulator (VPX model) with a
// test-controlled source for the per-disk virtualDisk performance counters.
//
// Stock vcsim reports 0 for virtualDisk OIO, IO size and latency and offers no
// per-disk instances, so the vSphere backend's counter arithmetic could not be
// tested against it. This program replaces the PerformanceManager in the
// simulator's registry with one that, for VirtualMachine entities:
//
//   - lists per-disk instances ("scsi0:1", "nvme0:0") in QueryAvailablePerfMetric,
//     minus the counters the source marks "unavailable" (to test the backend's
//     "counter not collected at this statistics level" error);
//   - answers QueryPerf with realtime samples aligned to 20 s boundaries, oldest
//     first, like vCenter, taking values from a JSON file re-read on every call.
//
// The JSON file (flag -perf-source or env VIOCONFORM_VCSIM_PERF) looks like
//
//	{"vms": {"<vm name or *>": {"<instance or *>": {"virtualDisk.readOIO.latest": 32,
//	                                                 "virtualDisk.readIOSize.latest": [4096, 8192]}}},
//	 "unavailable": ["virtualDisk.writeIOSize.latest"]}
//
// A number is the value of every sample; a list gives sample values cycled by
// the sample's end time (unix seconds / 20 modulo its length). Missing values
// read 0. Samples are 20 s long unless -realtime-interval says otherwise (tests use 1 s).
//
// It also registers the ServiceManager's "VscsiStats" service (a SimpleCommand):
// Start/Reset/StopVscsiStats answer "OK" and FetchAllHistograms answers with the
// content of the file given by -vscsistats-xml (env VIOCONFORM_VCSIM_VSCSISTATS),
// re-read on every call. The first stdout line is vcsim's own: "export GOVC_URL=... GOVC_SIM_PID=...".
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/vmware/govmomi/simulator"
)

func main() {
	listen := flag.String("l", "127.0.0.1:0", "listen address")
	user := flag.String("username", "", "login user (any user is accepted when empty)")
	pass := flag.String("password", "", "login password; read from env VIOCONFORM_VCSIM_PASSWORD when empty")
	source := flag.String("perf-source", os.Getenv("VIOCONFORM_VCSIM_PERF"), "JSON file with virtualDisk counter values")
	vscsiXML := flag.String("vscsistats-xml", os.Getenv("VIOCONFORM_VCSIM_VSCSISTATS"), "file FetchAllHistograms answers with")
	flag.Int64Var(&realtimeIntervalS, "realtime-interval", realtimeIntervalS, "seconds per generated realtime sample (ESXi: 20)")
	flag.Parse()
	if realtimeIntervalS < 1 {
		log.Fatal("-realtime-interval must be at least 1")
	}

	if *pass == "" {
		*pass = os.Getenv("VIOCONFORM_VCSIM_PASSWORD")
	}
	model := simulator.VPX()
	if err := model.Create(); err != nil {
		log.Fatal(err)
	}
	defer model.Remove()

	u := &url.URL{Host: *listen}
	if *user != "" {
		u.User = url.UserPassword(*user, *pass)
	}
	model.Service.Listen = u
	model.Service.TLS = new(tls.Config) // https with a self-signed certificate, like vcsim

	installPerfManager(*source)
	installVscsiStatsService(*vscsiXML)

	s := model.Service.NewServer()
	defer s.Close()
	fmt.Printf("export GOVC_URL=%s GOVC_SIM_PID=%d\n", s.URL, os.Getpid())
	os.Stdout.Sync()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
