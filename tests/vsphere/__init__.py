"""vSphere backend against govmomi's vcsim and a loopback sshd standing in for guests and ESXi."""
