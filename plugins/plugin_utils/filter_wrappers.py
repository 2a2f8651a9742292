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

import math

from ansible.errors import AnsibleFilterError

from ansible_collections.fleetqual.storage.plugins.plugin_utils import diagnostics as _diagnostics
from ansible_collections.fleetqual.storage.plugins.plugin_utils import prometheus as _prometheus
from ansible_collections.fleetqual.storage.plugins.plugin_utils import judge as _judge
from ansible_collections.fleetqual.storage.plugins.plugin_utils import metrics as _metrics
from ansible_collections.fleetqual.storage.plugins.plugin_utils import rules as _rules
from ansible_collections.fleetqual.storage.plugins.plugin_utils import validate as _validate
from ansible_collections.fleetqual.storage.plugins.plugin_utils import array_inputs as _array_inputs
from ansible_collections.fleetqual.storage.plugins.module_utils import plan as _plan
from ansible_collections.fleetqual.storage.plugins.module_utils.vocabulary import human_size as _human_size


def _wrap(name, func):
    def filter_func(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except _plan.PlanError as exc:
            raise AnsibleFilterError("fleetqual.storage.%s: invalid workload plan:\n  - %s"
                                     % (name, "\n  - ".join(exc.errors)))
        except (ValueError, TypeError) as exc:
            raise AnsibleFilterError("fleetqual.storage.%s: %s" % (name, exc))
    filter_func.__name__ = name
    filter_func.__doc__ = func.__doc__
    return filter_func


def _judge_with_defaults(workloads, rules=None, expected_ids=None, error=None, diagnostics=None, options=None, drives=None,
                         kernel=None, kernel_log=None, drives_after=None):
    return _judge.judge(workloads, rules, expected_ids=expected_ids, error=error, diagnostics=diagnostics,
                        options=options, drives=drives, kernel=kernel, kernel_log=kernel_log, drives_after=drives_after)


def _diagnose_checked(workloads, latency_bound_ms=None, options=None):
    problems = _diagnostics.validate_options(options)
    if latency_bound_ms is not None:
        try:  # extra vars (-e fleetqual_latency_bound_ms=20) arrive as strings
            latency_bound_ms = float(latency_bound_ms)
        except (TypeError, ValueError):
            latency_bound_ms = None
        if latency_bound_ms is None or not math.isfinite(latency_bound_ms) or latency_bound_ms <= 0:
            problems.append("latency_bound_ms (fleetqual_latency_bound_ms) must be a number of milliseconds > 0")
    if problems:
        raise ValueError("; ".join(problems))
    return _diagnostics.diagnose(workloads, options=options, latency_bound_ms=latency_bound_ms)


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
    "plan_summary": _plan.plan_summary,
    "largest_working_set": _plan.largest_working_set,
    "required_space": _plan.required_space,
    "expected_duration_s": _plan.expected_duration_s,
    "iobench_args": _plan.module_args,
    "validate_profile": _validate.validate_profile,
    "validate_rules": _rules.validate_rules,
    "validate_inputs": _validate.validate_inputs,
    "validate_arrays": _array_inputs.validate_arrays,
    "workload_metrics": _metrics.workload_metrics,
    "workload_record": _metrics.workload_record,
    "judge": _judge_with_defaults,
    "diagnostics": _diagnose_checked,
    "first_failing_rule": _judge.first_failing_rule,
    "human_size": _human_size,
    "host_prometheus": _host_prometheus,
}

FILTERS = {name: _wrap(name, func) for name, func in _TABLE.items()}


def filter_module(name):
    """The FilterModule class of the one-filter plugin plugins/filter/<name>.py."""

    class FilterModule:
        """Ansible's entry point of a filter plugin file."""

        def filters(self):
            return {name: FILTERS[name]}

    FilterModule.__doc__ = "fleetqual.storage.%s" % name
    return FilterModule
