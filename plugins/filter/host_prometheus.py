# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.host_prometheus filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: host_prometheus
author: fleetqual.storage developers
version_added: "0.2.0"
short_description: A host's own Prometheus series, in the textfile exposition format
description:
  - >-
    Renders one host record (docs/contracts.md) as the content of a node_exporter textfile
    (C(<fleetqual_node_exporter_textfile_dir>/fleetqual.prom) on that host), written with
    C(prometheus_client). Per workload, its operations and bytes per second, latency percentiles in
    seconds, device utilisation as a 0..1 ratio and device await in seconds; per host,
    C(fleetqual_host_pass) and C(fleetqual_last_run_timestamp_seconds). Prometheus adds the host's own
    labels when it scrapes the file.
  - >-
    Needs the Python library C(prometheus_client) on the controller, and fails saying to install it
    otherwise.
  - >-
    The controller's fleet summary is written by the C(fleetqual.storage.qualify_report) callback instead
    (docs/report.md).
positional: _input
options:
  _input:
    description: The host record (C(_fleetqual_result.record), as M(fleetqual.storage.qualify_host) returns it).
    type: dict
    required: true
requirements:
  - prometheus_client (Python library, on the controller)
"""

EXAMPLES = r"""
- name: Write this host's own Prometheus series into its node_exporter textfile directory
  ansible.builtin.copy:
    content: "{{ _fleetqual_result.record | fleetqual.storage.host_prometheus }}"
    dest: /var/lib/prometheus/node-exporter/fleetqual.prom
    mode: "0644"
"""

RETURN = r"""
_value:
  description: Prometheus text exposition format, one C(# HELP)/C(# TYPE) block per metric.
  type: str
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("host_prometheus")
