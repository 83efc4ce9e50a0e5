package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// realtimeQueryID is the intervalId of realtime queries; realtimeKeptS is how long ESXi keeps realtime samples.
const (
	realtimeQueryID = 20
	realtimeKeptS   = 3600
)

// realtimeIntervalS is the length of one generated sample: 20 s like ESXi, or shorter
// (flag -realtime-interval) so that tests need not wait 20 s for the next sample.
var realtimeIntervalS int64 = 20

// perDiskCounters are offered per disk instance; their values come from the JSON source.
var perDiskCounters = []string{
	"virtualDisk.readOIO.latest",
	"virtualDisk.writeOIO.latest",
	"virtualDisk.readIOSize.latest",
	"virtualDisk.writeIOSize.latest",
	"virtualDisk.readLatencyUS.latest",
	"virtualDisk.writeLatencyUS.latest",
	"virtualDisk.numberReadAveraged.average",
	"virtualDisk.numberWriteAveraged.average",
	"virtualDisk.smallSeeks.latest",
	"virtualDisk.mediumSeeks.latest",
	"virtualDisk.largeSeeks.latest",
	"virtualDisk.totalReadLatency.average",
	"virtualDisk.totalWriteLatency.average",
	"virtualDisk.read.average",
	"virtualDisk.write.average",
}

// perfSource is the decoded JSON file.
type perfSource struct {
	VMs         map[string]map[string]map[string]json.RawMessage `json:"vms"`
	Unavailable []string                                         `json:"unavailable"`
}

func loadSource(path string) (*perfSource, error) {
	src := &perfSource{}
	if path == "" {
		return src, nil
	}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return src, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, src); err != nil {
		return nil, fmt.Errorf("perf source %s: %w", path, err)
	}
	return src, nil
}

func (s *perfSource) unavailable(name string) bool {
	for _, n := range s.Unavailable {
		if n == name {
			return true
		}
	}
	return false
}

// value is the sample ending at unix time end for one VM, instance and counter.
func (s *perfSource) value(vm, instance, counter string, end int64) int64 {
	for _, v := range []string{vm, "*"} {
		for _, i := range []string{instance, "*"} {
			raw, ok := s.VMs[v][i][counter]
			if !ok {
				continue
			}
			var one int64
			if json.Unmarshal(raw, &one) == nil {
				return one
			}
			var many []int64
			if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
				return many[(end/realtimeIntervalS)%int64(len(many))]
			}
		}
	}
	return 0
}

// PerfManager wraps the simulator's PerformanceManager; non-VM entities keep the stock behaviour.
type PerfManager struct {
	*simulator.PerformanceManager
	sourcePath string
	names      map[int32]string // counter key -> group.name.rollup
	keys       map[string]int32
}

func installPerfManager(sourcePath string) {
	ref := types.ManagedObjectReference{Type: "PerformanceManager", Value: "PerfMgr"}
	stock := simulator.Map.Get(ref).(*simulator.PerformanceManager)
	pm := &PerfManager{PerformanceManager: stock, sourcePath: sourcePath,
		names: map[int32]string{}, keys: map[string]int32{}}
	for _, c := range stock.PerfCounter {
		name := c.GroupInfo.GetElementDescription().Key + "." + c.NameInfo.GetElementDescription().Key + "." + string(c.RollupType)
		pm.names[c.Key] = name
		pm.keys[name] = c.Key
	}
	for _, name := range perDiskCounters {
		if _, ok := pm.keys[name]; !ok {
			log.Fatalf("the simulator's counter table has no %s", name)
		}
	}
	simulator.Map.Put(pm)
}

// diskInstances maps each virtual disk of vm to its perf instance name, e.g. "scsi0:1".
func diskInstances(vm *simulator.VirtualMachine) []string {
	buses := map[int32]string{}
	for _, d := range vm.Config.Hardware.Device {
		key := d.GetVirtualDevice().Key
		switch c := d.(type) {
		case types.BaseVirtualSCSIController:
			buses[key] = "scsi" + strconv.Itoa(int(c.GetVirtualSCSIController().BusNumber))
		case *types.VirtualNVMEController:
			buses[key] = "nvme" + strconv.Itoa(int(c.BusNumber))
		case types.BaseVirtualSATAController:
			buses[key] = "sata" + strconv.Itoa(int(c.GetVirtualSATAController().BusNumber))
		case *types.VirtualIDEController:
			buses[key] = "ide" + strconv.Itoa(int(c.BusNumber))
		}
	}
	var out []string
	for _, d := range vm.Config.Hardware.Device {
		disk, ok := d.(*types.VirtualDisk)
		if !ok || disk.UnitNumber == nil {
			continue
		}
		if bus, ok := buses[disk.ControllerKey]; ok {
			out = append(out, fmt.Sprintf("%s:%d", bus, *disk.UnitNumber))
		}
	}
	sort.Strings(out)
	return out
}

// vmInfo returns the name and disk instances of a VM entity, or ok=false for other entities.
func vmInfo(ctx *simulator.Context, ref types.ManagedObjectReference) (name string, disks []string, ok bool) {
	vm, isVM := ctx.Map.Get(ref).(*simulator.VirtualMachine)
	if !isVM {
		return "", nil, false
	}
	ctx.WithLock(vm, func() {
		name = vm.Name
		disks = diskInstances(vm)
	})
	return name, disks, true
}

// QueryAvailablePerfMetric adds the per-disk instances of the controlled counters for realtime VM queries.
func (p *PerfManager) QueryAvailablePerfMetric(ctx *simulator.Context, req *types.QueryAvailablePerfMetric) soap.HasFault {
	body := p.PerformanceManager.QueryAvailablePerfMetric(ctx, req).(*methods.QueryAvailablePerfMetricBody)
	_, disks, isVM := vmInfo(ctx, req.Entity)
	if !isVM || (req.IntervalId != 0 && req.IntervalId != realtimeQueryID) {
		return body
	}
	src, err := loadSource(p.sourcePath)
	if err != nil {
		body.Fault_ = simulator.Fault(err.Error(), &types.InvalidArgument{})
		return body
	}
	for _, name := range perDiskCounters {
		if src.unavailable(name) {
			continue
		}
		for _, inst := range disks {
			body.Res.Returnval = append(body.Res.Returnval, types.PerfMetricId{CounterId: p.keys[name], Instance: inst})
		}
	}
	return body
}

// sampleEnds are the realtime sample end times (unix seconds, oldest first) that a query spec selects.
func sampleEnds(qs types.PerfQuerySpec, now time.Time) []int64 {
	last := now.Unix() / realtimeIntervalS * realtimeIntervalS
	if qs.EndTime != nil && qs.EndTime.Unix() < last {
		last = qs.EndTime.Unix() / realtimeIntervalS * realtimeIntervalS
	}
	first := now.Unix() - realtimeKeptS
	if qs.StartTime != nil && qs.StartTime.Unix() >= first {
		first = qs.StartTime.Unix() + 1 // startTime is exclusive
	}
	var ends []int64
	for t := (first + realtimeIntervalS - 1) / realtimeIntervalS * realtimeIntervalS; t <= last; t += realtimeIntervalS {
		ends = append(ends, t)
	}
	if qs.MaxSample > 0 && len(ends) > int(qs.MaxSample) { // the newest ones
		ends = ends[len(ends)-int(qs.MaxSample):]
	}
	return ends
}

// QueryPerf answers VM queries from the JSON source, in "normal" or "csv" format.
func (p *PerfManager) QueryPerf(ctx *simulator.Context, req *types.QueryPerf) soap.HasFault {
	for _, qs := range req.QuerySpec {
		if _, _, isVM := vmInfo(ctx, qs.Entity); !isVM {
			return p.PerformanceManager.QueryPerf(ctx, req)
		}
	}
	body := &methods.QueryPerfBody{Res: &types.QueryPerfResponse{}}
	src, err := loadSource(p.sourcePath)
	if err != nil {
		body.Fault_ = simulator.Fault(err.Error(), &types.InvalidArgument{})
		return body
	}
	now := time.Now()
	for _, qs := range req.QuerySpec {
		vmName, _, _ := vmInfo(ctx, qs.Entity)
		ends := sampleEnds(qs, now)
		info := make([]types.PerfSampleInfo, len(ends))
		for i, t := range ends {
			info[i] = types.PerfSampleInfo{Timestamp: time.Unix(t, 0).UTC(), Interval: int32(realtimeIntervalS)}
		}
		series := make([]*types.PerfMetricIntSeries, len(qs.MetricId))
		for j, id := range qs.MetricId {
			s := &types.PerfMetricIntSeries{Value: make([]int64, len(ends))}
			s.Id = id
			for i, t := range ends {
				s.Value[i] = src.value(vmName, id.Instance, p.names[id.CounterId], t)
			}
			series[j] = s
		}
		if qs.Format == string(types.PerfFormatCsv) {
			body.Res.Returnval = append(body.Res.Returnval, csvMetric(qs.Entity, info, series))
			continue
		}
		m := &types.PerfEntityMetric{SampleInfo: info}
		m.Entity = qs.Entity
		for _, s := range series {
			m.Value = append(m.Value, s)
		}
		body.Res.Returnval = append(body.Res.Returnval, m)
	}
	return body
}

// csvMetric encodes samples the way vCenter's CSV format does: "interval,timestamp,..." and "v1,v2,...".
func csvMetric(entity types.ManagedObjectReference, info []types.PerfSampleInfo, series []*types.PerfMetricIntSeries) *types.PerfEntityMetricCSV {
	m := &types.PerfEntityMetricCSV{}
	m.Entity = entity
	var parts []string
	for _, si := range info {
		parts = append(parts, strconv.Itoa(int(si.Interval)), si.Timestamp.Format(time.RFC3339))
	}
	m.SampleInfoCSV = strings.Join(parts, ",")
	for _, s := range series {
		vals := make([]string, len(s.Value))
		for i, v := range s.Value {
			vals[i] = strconv.FormatInt(v, 10)
		}
		m.Value = append(m.Value, types.PerfMetricSeriesCSV{PerfMetricSeries: s.PerfMetricSeries, Value: strings.Join(vals, ",")})
	}
	return m
}
