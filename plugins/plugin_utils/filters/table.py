# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wrappers behind the collection's Jinja2 filters: thin calls of plugin_utils (metrics,
rules, judge, diagnostics) and module_utils (plan: a host computes its plan too)
that turn their errors into AnsibleFilterError naming the filter.

Each filter is plugins/filter/<name>.py (its documentation and a FilterModule returning
FILTERS[<name>]): Galaxy and ansible-doc list filters one file each. The logic lives in
plugin_utils and module_utils so the qualify_report callback uses the very same code (and a
module the very same plan).
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics import diagnose as _diagnostics
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import prometheus as _prometheus
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import host as _judge
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import workload as _metrics
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import rules as _rules
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import durability as _durability
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import inputs as _validate
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import arrays as _array_inputs
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import durability as _durability_inputs
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import profiles as _plan
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import summary
from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import human_size as _human_size
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.errors import filter_errors


def _judge_with_defaults(workloads, rules=None, expected_ids=None, error=None, diagnostics=None, options=None, drives=None,
                         kernel=None, kernel_log=None, drives_after=None):
    return _judge.judge(workloads, rules, expected_ids=expected_ids, error=error, diagnostics=diagnostics,
                        options=options, drives=drives, kernel=kernel, kernel_log=kernel_log, drives_after=drives_after)


def _host_prometheus(record):
    """A host record's own Prometheus series (textfile exposition format), for its
    node_exporter textfile directory (prometheus.host_prometheus_text)."""
    try:
        return _prometheus.host_prometheus_text(record)
    except ImportError as exc:
        raise ValueError("the Python library prometheus_client is needed on the controller to write "
                         "fleetqual_node_exporter_textfile_dir's file: pip install prometheus-client (%s)" % exc)


_TABLE = {
    "plan": _plan.plan_on_targets,
    "plan_summary": summary.plan_summary,
    "largest_working_set": summary.largest_working_set,
    "required_space": summary.required_space,
    "expected_duration_s": summary.expected_duration_s,
    "iobench_args": _plan.module_args,
    "validate_profile": _validate.validate_profile,
    "validate_rules": _rules.validate_rules,
    "validate_inputs": _validate.validate_inputs,
    "validate_arrays": _array_inputs.validate_arrays,
    "workload_metrics": _metrics.workload_metrics,
    "workload_record": _metrics.workload_record,
    "judge": _judge_with_defaults,
    "diagnostics": _diagnostics.diagnose_checked,
    "first_failing_rule": _judge.first_failing_rule,
    "human_size": _human_size,
    "host_prometheus": _host_prometheus,
    "durability_plan": _durability_inputs.durability_plan,
    "durability_verdict": _durability.judge_durability,
}

FILTERS = {name: filter_errors(name, func) for name, func in _TABLE.items()}


def filter_module(name):
    """The FilterModule class of the one-filter plugin plugins/filter/<name>.py."""

    class FilterModule:
        """Ansible's entry point of a filter plugin file."""

        def filters(self):
            return {name: FILTERS[name]}

    FilterModule.__doc__ = "fleetqual.storage.%s" % name
    return FilterModule
