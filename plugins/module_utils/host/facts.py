# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The few host facts the qualification needs, read in the module run that starts the job.

The whole ``setup`` module (hardware, platform, user, distribution: mounts, DMI,
every block device, ...) cost one module run and most of a second per host. The plan needs
the RAM (``memtotal_mb``: buffered over-cache working sets are 2 x RAM); the host record
names the architecture, kernel, vCPUs, product and the model of the measured disk. Each
is read here from the same source and with the same meaning as Ansible's fact of that name
(``ansible.module_utils.facts.hardware.linux`` and ``.system.platform``):

* ``memtotal_mb``: ``MemTotal`` of /proc/meminfo in kB // 1024;
* ``processor_vcpus``: the ``processor`` entries of /proc/cpuinfo (logical CPUs);
* ``product_name``: /sys/devices/virtual/dmi/id/product_name (None without DMI);
* ``architecture``: ``platform.machine()``; ``kernel``: ``platform.release()``;
* ``user_id``: the login name of the user the module runs as;
* ``device_models``: ``{block device: model}`` from /sys/block/<dev>/device/model, the
  ``model`` of Ansible's ``devices`` fact.

They are returned as the task's ``ansible_facts``, so the rest of the play reads them as it
read the ``setup`` facts (``ansible_facts['memtotal_mb']``...). ``os_family`` is not read
here: only a build on the host (``roles/iobench/tasks/build_target.yml``) needs it, and that
rare path gathers it itself.
"""

import getpass
import os
import platform

FACT_NAMES = ("architecture", "kernel", "memtotal_mb", "processor_vcpus", "product_name", "user_id",
              "device_models")


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except (IOError, OSError, UnicodeDecodeError):
        return None


def memtotal_mb(meminfo_text):
    """``MemTotal`` in MiB (Ansible's ``memtotal_mb``), None when absent."""
    for line in (meminfo_text or "").splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) // 1024
    return None


def processor_vcpus(cpuinfo_text):
    """Logical CPUs: the ``processor`` entries of /proc/cpuinfo, else ``os.cpu_count()``."""
    n = sum(1 for line in (cpuinfo_text or "").splitlines()
            if line.split(":", 1)[0].strip() == "processor")
    return n or os.cpu_count()


def device_models(sys_block="/sys/block"):
    out = {}
    try:
        names = sorted(os.listdir(sys_block))
    except OSError:
        return out
    for name in names:
        model = _read(os.path.join(sys_block, name, "device", "model"))
        out[name] = model.strip() if model and model.strip() else None
    return out


def user_id():
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.geteuid())


def gather(proc="/proc", sys_root="/sys"):
    """The facts above as one dict (keys :data:`FACT_NAMES`)."""
    product = _read(os.path.join(sys_root, "devices/virtual/dmi/id/product_name"))
    return {
        "architecture": platform.machine(),
        "kernel": platform.release(),
        "memtotal_mb": memtotal_mb(_read(os.path.join(proc, "meminfo"))),
        "processor_vcpus": processor_vcpus(_read(os.path.join(proc, "cpuinfo"))),
        "product_name": product.strip() if product and product.strip() else None,
        "user_id": user_id(),
        "device_models": device_models(os.path.join(sys_root, "block")),
    }
