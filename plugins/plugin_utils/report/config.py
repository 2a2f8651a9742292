# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report's settings, read the same way by the qualify_report callback and the
report actions (fleet_verdicts, fleet_report): the report options (the callback's options:
ansible.cfg ``[fleetqual_report]``, ``FLEETQUAL_REPORT_*``), the baseline they name, and
the one default of ``fleetqual_results_dir``."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.loader import callback_loader

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.baseline import load_baseline

RESULTS_DIR_ENV = "FLEETQUAL_RESULTS_DIR"
# the options of fleet.aggregate (fleet.DEFAULT_OPTIONS) the callback's configuration sets
OPTION_KEYS = ("outliers", "regressions", "drives", "outlier_mad_score", "outlier_pct_below",
               "outlier_min_diff_ms", "regression_tolerance_pct", "baseline")


def default_results_dir():
    """``fleetqual_results_dir``'s default, defined here only: ``$FLEETQUAL_RESULTS_DIR``,
    else ``results/`` in the directory ansible-playbook runs in (an absolute path)."""
    return os.environ.get(RESULTS_DIR_ENV) or os.path.join(os.getcwd(), "results")


def table_max_hosts(get_option):
    """The option ``table_max_hosts`` from a plugin's ``get_option``: None (unset, or a plugin
    without the option: the terminal table lists every host) or a number of hosts >= 0 past
    which the terminal lists only the hosts that did not pass (render_text.bounded). ValueError
    for anything else."""
    try:
        value = get_option("table_max_hosts")
    except KeyError:
        return None
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ValueError("table_max_hosts must be a number of hosts, not %r" % value)
    try:
        count = int(value)
    except (TypeError, ValueError):
        raise ValueError("table_max_hosts must be a number of hosts, not %r" % value) from None
    if count < 0 or count != float(value):
        raise ValueError("table_max_hosts must be a whole number of hosts >= 0, not %r" % value)
    return count


def options_and_baseline(get_option):
    """(options for fleet.aggregate, the loaded baseline or None, notes) from a plugin's
    ``get_option``; a baseline that cannot be read is left out, said in the notes."""
    opts = {key: get_option(key) for key in OPTION_KEYS}
    baseline = None
    notes = []
    if opts.get("baseline"):
        try:
            baseline = load_baseline(opts["baseline"])
        except (OSError, ValueError) as exc:
            notes.append("baseline not used: %s" % exc)
    return opts, baseline, notes


CALLBACK = "fleetqual.storage.qualify_report"


def report_settings():
    """The qualify_report callback's configured options (ansible.cfg ``[fleetqual_report]``,
    ``FLEETQUAL_REPORT_*``), whether or not the callback is enabled: the report and the gate
    read one configuration."""
    cb = callback_loader.get(CALLBACK)
    if cb is None:
        raise AnsibleActionFail("the callback %s is not installed with this collection" % CALLBACK)
    cb.set_options()
    return cb.get_option
