# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The errors of the collection's code as Ansible shows a filter's: one place, for the filters
and the actions that call the same functions."""

from ansible.errors import AnsibleFilterError

from ansible_collections.fleetqual.storage.plugins.module_utils.plan import profiles as _plan


def filter_errors(name, func):
    """``func`` whose errors are AnsibleFilterError naming ``name`` (``fleetqual.storage.<name>:
    ...``): a plan's errors listed one per line, ValueError and TypeError as their message.
    Each filter of the collection is one (plugins/filter/), and so are the calls of the
    same code by the action that judges a host's record."""
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
