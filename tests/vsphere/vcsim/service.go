package main

import (
	"os"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// ServiceManager lists the one service this simulator offers: the hosts' "VscsiStats" SimpleCommand.
type ServiceManager struct {
	mo.ServiceManager
}

// QueryServiceList filters the services by name and location, like vCenter.
func (m *ServiceManager) QueryServiceList(req *types.QueryServiceList) soap.HasFault {
	var out []types.ServiceManagerServiceInfo
	for _, s := range m.Service {
		if req.ServiceName != "" && req.ServiceName != s.ServiceName {
			continue
		}
		if len(req.Location) > 0 && !overlaps(req.Location, s.Location) {
			continue
		}
		out = append(out, s)
	}
	return &methods.QueryServiceListBody{Res: &types.QueryServiceListResponse{Returnval: out}}
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

// VscsiStatsCommand answers ExecuteSimpleCommand like ESXi's VscsiStats service.
type VscsiStatsCommand struct {
	mo.SimpleCommand
	xmlPath string
}

func (c *VscsiStatsCommand) ExecuteSimpleCommand(req *types.ExecuteSimpleCommand) soap.HasFault {
	body := &methods.ExecuteSimpleCommandBody{Res: &types.ExecuteSimpleCommandResponse{}}
	if len(req.Arguments) != 1 {
		body.Fault_ = simulator.Fault("one argument expected", &types.InvalidArgument{InvalidProperty: "arguments"})
		return body
	}
	switch req.Arguments[0] {
	case "StartVscsiStats", "ResetVscsiStats", "StopVscsiStats":
		body.Res.Returnval = "OK"
	case "FetchAllHistograms":
		data, err := os.ReadFile(c.xmlPath)
		if err != nil {
			body.Fault_ = simulator.Fault(err.Error(), &types.InvalidArgument{InvalidProperty: "arguments"})
			return body
		}
		body.Res.Returnval = string(data)
	default:
		body.Fault_ = simulator.Fault("unknown command "+req.Arguments[0], &types.InvalidArgument{InvalidProperty: "arguments"})
	}
	return body
}

// installVscsiStatsService registers the ServiceManager with one VscsiStats service per host.
func installVscsiStatsService(xmlPath string) {
	mgr := &ServiceManager{}
	mgr.Self = types.ManagedObjectReference{Type: "ServiceManager", Value: "ServiceMgr"}
	for _, h := range simulator.Map.All("HostSystem") {
		host := h.(*simulator.HostSystem)
		cmd := &VscsiStatsCommand{xmlPath: xmlPath}
		cmd.Self = types.ManagedObjectReference{Type: "SimpleCommand", Value: "vscsiStats-" + host.Self.Value}
		info := types.ServiceManagerServiceInfo{
			ServiceName: "VscsiStats",
			Location:    []string{"vmware.host." + host.Name},
			Service:     cmd.Self,
			Description: "vscsiStats histograms",
		}
		cmd.Entity = info
		cmd.EncodingType = "string"
		simulator.Map.Put(cmd)
		mgr.Service = append(mgr.Service, info)
	}
	simulator.Map.Put(mgr)
}
