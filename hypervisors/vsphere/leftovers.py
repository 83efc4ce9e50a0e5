"""List, and on request destroy, clones that a killed vioconform run left in vCenter.

Every clone is named ``vioconform-<run id>-<guest>`` and annotated with its run, so after a
``kill -9`` or a lost connection they are found by name::

    python -m hypervisors.vsphere.leftovers --target vsphere.toml            # list
    python -m hypervisors.vsphere.leftovers --target vsphere.toml --destroy  # remove them all
    python -m hypervisors.vsphere.leftovers --target vsphere.toml --destroy --run 20240501-101500-4242

Templates are never touched, even when their name matches.
"""

from __future__ import annotations

import argparse
import os
import sys

from pyVmomi import vim

from hypervisors.vsphere.backend import NAME_PREFIX
from hypervisors.vsphere.config import TARGET_ENV, parse_target
from hypervisors.vsphere.vcenter import VCenter
from model.errors import HypervisorError


def leftovers(vc: VCenter, run_id: str = "") -> list[vim.VirtualMachine]:
    """The clones of run ``run_id`` (of every run when empty), templates excluded."""
    prefix = f"{NAME_PREFIX}{run_id}-" if run_id else NAME_PREFIX
    return sorted((vm for vm in vc.all(vim.VirtualMachine)
                   if vm.name.startswith(prefix) and not (vm.config is not None and vm.config.template)),
                  key=lambda vm: vm.name)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hypervisors.vsphere.leftovers", description=__doc__.splitlines()[0])
    p.add_argument("--target", default=os.environ.get(TARGET_ENV), help=f"as for record (default: ${TARGET_ENV})")
    p.add_argument("--run", default="", help="only this run id (the part after vioconform-)")
    p.add_argument("--destroy", action="store_true", help="power off and delete what is found")
    args = p.parse_args(argv)
    if not args.target:
        p.error(f"give --target or set {TARGET_ENV}")
    try:
        vc = VCenter(parse_target(args.target))
        try:
            found = leftovers(vc, args.run)
            for vm in found:
                note = (vm.config.annotation if vm.config is not None else "") or ""
                print(f"{vm.name}\t{vm.runtime.powerState}\t{note}")
                if args.destroy:
                    vc.destroy_vm(vm.name)
            print(f"{len(found)} clone(s){' destroyed' if args.destroy and found else ''}", file=sys.stderr)
        finally:
            vc.close()
    except HypervisorError as e:
        print(f"leftovers: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
