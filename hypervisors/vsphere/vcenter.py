"""A pyVmomi session with the few inventory look-ups and task waits the backend needs.

Every failure becomes a ``HypervisorError`` whose message says what to check, within the
configured connect timeout: an unreachable vCenter, bad credentials, a name that is not in the
inventory (the message lists what is there).
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from typing import Any, TypeVar

from pyVim.connect import SmartStubAdapter
from pyVmomi import vim, vmodl

from hypervisors.vsphere.config import VSphereConfig
from model.errors import HypervisorError
from model.secret import PASSWORD_ENV

log = logging.getLogger("vioconform.vsphere")

T = TypeVar("T", bound=vim.ManagedEntity)

#: How many names an error message lists when a look-up fails.
LISTED_NAMES = 10


class TaskFailed(HypervisorError):
    """A vCenter task ended in error; ``fault`` is vCenter's fault (its type says what kind of refusal)."""

    def __init__(self, message: str, fault: vmodl.MethodFault | None) -> None:
        super().__init__(message)
        self.fault = fault


class VCenter:
    """One logged-in session: ``content`` is the ServiceContent, look-ups search the whole inventory."""

    def __init__(self, config: VSphereConfig) -> None:
        self.config = config
        self._stub: Any = None
        self.si, self.content = self._connect(config)

    def _connect(self, cfg: VSphereConfig) -> tuple[Any, Any]:
        """Log in; our own stub rather than SmartConnect, so that its sockets are closed on every failure."""
        where = f"vCenter {cfg.host}:{cfg.port}"
        old = socket.getdefaulttimeout()
        socket.setdefaulttimeout(cfg.connect_timeout_s)  # bounds the TLS handshake and every read until logged in
        logged_in = False
        try:
            self._stub = SmartStubAdapter(host=cfg.host, port=cfg.port, disableSslCertValidation=cfg.insecure,
                                          httpConnectionTimeout=int(cfg.connect_timeout_s), connectionPoolTimeout=-1)
            si = vim.ServiceInstance("ServiceInstance", self._stub)
            content = si.RetrieveContent()
            if content.sessionManager is None:
                raise HypervisorError(f"{where} offers no SessionManager: is it a vCenter or ESXi SDK endpoint?")
            _login(content.sessionManager, cfg, where)
            logged_in = True
            return si, content
        except ssl.SSLCertVerificationError as e:
            raise HypervisorError(f"{where}: TLS certificate not trusted ({e.verify_message}); install the "
                                  f"vCenter CA certificate, or set insecure=true for a lab vCenter") from None
        except (TimeoutError, OSError) as e:
            raise HypervisorError(f"{where} is unreachable: {e}; check host, port and network "
                                  f"(waited at most {cfg.connect_timeout_s:.0f} s)") from None
        except vmodl.MethodFault as e:
            raise HypervisorError(f"{where}: login failed: {fault_text(e)}") from None
        finally:
            socket.setdefaulttimeout(old)
            if not logged_in and self._stub is not None:
                self._stub.DropConnections()

    def all(self, kind: type[T]) -> list[T]:
        view = self.content.viewManager.CreateContainerView(self.content.rootFolder, [kind], True)
        try:
            return list(view.view)
        finally:
            view.Destroy()

    def find(self, kind: type[T], name: str, what: str) -> T:
        """The one entity of ``kind`` called ``name``; the error lists the names that exist."""
        found = [e for e in self.all(kind) if e.name == name]
        if found:
            return found[0]
        names = sorted(e.name for e in self.all(kind))
        shown = ", ".join(names[:LISTED_NAMES]) + (" ..." if len(names) > LISTED_NAMES else "")
        raise HypervisorError(f"{what} {name!r} not found in {self.config.host}; existing: {shown or '(none)'}")

    def find_vm(self, name: str) -> vim.VirtualMachine | None:
        return next((vm for vm in self.all(vim.VirtualMachine) if vm.name == name), None)

    def datacenter(self) -> vim.Datacenter:
        if self.config.datacenter:
            return self.find(vim.Datacenter, self.config.datacenter, "datacenter")
        dcs = self.all(vim.Datacenter)
        if not dcs:
            raise HypervisorError(f"{self.config.host} has no datacenter")
        return dcs[0]

    def wait(self, task: vim.Task, what: str, timeout_s: float | None = None) -> Any:
        """Poll a task until it ends; return its result or raise with vCenter's reason.

        Polled by hand: pyVim.task.WaitForTask crashes on the task names vcsim uses.
        """
        limit = self.config.task_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        while True:
            info = task.info
            if info.state == vim.TaskInfo.State.success:
                return info.result
            if info.state == vim.TaskInfo.State.error:
                reason = fault_text(info.error) if info.error is not None else "unknown error"
                raise TaskFailed(f"{what} failed: {reason}", info.error)
            if time.monotonic() > deadline:
                raise HypervisorError(f"{what} did not finish within {limit:.0f} s (task {task._moId})")
            time.sleep(0.2)

    def destroy_vm(self, name: str) -> None:
        """Power off and delete the VM ``name`` if it exists (the cleanup action of every clone)."""
        vm = self.find_vm(name)
        if vm is None:
            return
        try:
            if vm.runtime.powerState != vim.VirtualMachine.PowerState.poweredOff:
                self.wait(vm.PowerOffVM_Task(), f"powering off {name}", timeout_s=120)
        except (HypervisorError, vmodl.MethodFault) as e:
            log.warning("power-off of %s failed (%s); destroying anyway", name, e)
        self.wait(vm.Destroy_Task(), f"destroying {name}", timeout_s=300)
        log.info("vsphere: destroyed %s", name)

    def close(self) -> None:
        try:
            self.content.sessionManager.Logout()
        except Exception as e:  # noqa: BLE001 the session may already be gone; closing must not mask the real error
            log.debug("logout: %s", e)
        finally:
            self._stub.DropConnections()


def _login(session_manager: Any, cfg: VSphereConfig, where: str) -> None:
    """The one call that reveals the password. Whatever fails below it (pyVmomi's frames hold the
    password and the SOAP body carrying it) is turned into a HypervisorError raised outside the
    ``except`` block: no chained exception, no frame below this one, reaches a traceback."""
    try:
        session_manager.Login(cfg.user, cfg.password.reveal(), None)
        return
    except vim.fault.InvalidLogin:
        reason = (f" rejected the login of {cfg.user!r}: check the user and the password "
                  f"in {PASSWORD_ENV} or password_file")
    except vmodl.MethodFault as e:
        reason = f": login failed: {fault_text(e)}"
    except (TimeoutError, OSError) as e:
        reason = (f" is unreachable during login: {type(e).__name__}; check host, port and network "
                  f"(waited at most {cfg.connect_timeout_s:.0f} s)")
    except Exception as e:  # noqa: BLE001 an answer pyVmomi cannot parse (not a vCenter): its frames hold the password
        reason = f": login failed: {type(e).__name__} (is it a vCenter or ESXi SDK endpoint?)"
    raise HypervisorError(f"{where}{reason}")


def fault_text(fault: BaseException | vmodl.MethodFault) -> str:
    """vCenter's message of a fault (its ``msg``), or the fault's type when it has none."""
    return str(getattr(fault, "msg", None) or type(fault).__name__)


def devices(vm: vim.VirtualMachine) -> list[vim.vm.device.VirtualDevice]:
    """The VM's virtual hardware; an error if vCenter cannot read its configuration (inaccessible VM)."""
    if vm.config is None:
        raise HypervisorError(f"VM {vm.name}: vCenter has no configuration for it (is it inaccessible or orphaned?)")
    return list(vm.config.hardware.device)


def host_name(vm: vim.VirtualMachine) -> str:
    """The name of the ESXi host the VM runs on (vscsiStats runs there)."""
    if vm.runtime.host is None:
        raise HypervisorError(f"VM {vm.name} is on no host (is it powered off or disconnected?)")
    return str(vm.runtime.host.name)

