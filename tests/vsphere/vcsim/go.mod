module vioconform/tests/vsphere/vcsim

go 1.22

require github.com/vmware/govmomi v0.46.3

require github.com/google/uuid v1.6.0 // indirect
