# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: bounded
type: stdout
short_description: Output that does not grow with the fleet; every failure in full
version_added: "0.2.0"
description:
  - The default callback (P(ansible.builtin.default#callback)), except that what went well is counted
    instead of printed host by host, so a passing run over 1,000 hosts prints as many lines as
    one over a single host (issue 18).
  - Not printed (counted) - ok, changed and skipped results, loop items, C(included) lines and
    retries. The task banner appears only above something printed.
  - Printed in full, as by the default callback - every failed task of every host (also one a
    C(block)'s C(rescue) records, so the reason of an C(ERROR) verdict is on screen) and every
    unreachable host, with the task's banner and the whole message.
  - One line per play (per serial batch) - how many hosts it ran on and how many failed or were
    unreachable, with the ok, changed and skipped totals.
  - Warnings of results not printed - one line per task (the first warning and how many hosts
    had one), at most O(warning_tasks) such lines.
  - The recap - a line per host that failed or was unreachable, one line for all the others.
  - Lines other plugins print themselves are untouched (the fleet progress line of
    C(fleetqual.storage.job), the C(fleetqual.storage.qualify_report) report).
  - At verbosity 1 and above (C(-v)) it prints what the default callback prints.
  - Only the terminal output changes. Every other callback still receives every task result; under
    AWX (ansible-runner) the C(awx_display) callback records a job event for every task and host
    whatever the stdout callback prints.
extends_documentation_fragment:
  - ansible.builtin.default_callback
  - ansible.builtin.result_format_callback
author:
  - fleetqual.storage developers (!UNKNOWN)
requirements:
  - Set as the stdout callback, C(stdout_callback = fleetqual.storage.bounded) in C(ansible.cfg) (see C(examples/ansible.cfg)).
options:
  warning_tasks:
    description: At most this many lines of warnings of results not printed; beyond it, one line counts the rest.
    type: int
    default: 20
    ini:
      - section: fleetqual_bounded
        key: warning_tasks
    env:
      - name: FLEETQUAL_BOUNDED_WARNING_TASKS
"""

import collections

from ansible import constants as C
from ansible.playbook.task_include import TaskInclude
from ansible.plugins.callback.default import CallbackModule as DefaultCallback

# the default callback's options that print a line per host for what went well
PER_HOST_OPTIONS = ("display_ok_hosts", "display_skipped_hosts", "show_per_host_start")
RECAP_KEYS = ("ok", "changed", "unreachable", "failures", "skipped", "rescued", "ignored")


def plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def warning_text(warning):
    """The message of a warning (a 2.19 WarningSummary, or a string from older results)."""
    event = getattr(warning, "event", None)
    msg = getattr(event, "msg", None) if event is not None else None
    return str(msg if msg is not None else warning).strip()


def only_verbose(name):
    """The default callback's method ``name``, called only at verbosity 1 and above."""
    def method(self, *args, **kwargs):
        if self._verbose():
            return getattr(DefaultCallback, name)(self, *args, **kwargs)
        return None
    method.__name__ = name
    return method


class PlayTally:
    """What one play (or serial batch) did, counted per host and per result."""

    def __init__(self, name):
        self.name = name
        self.hosts = set()
        self.failed = set()
        self.unreachable = set()
        self.counts = collections.Counter()

    def line(self):
        hosts = len(self.hosts)
        bad = []
        if self.failed:
            bad.append("%d failed" % len(self.failed))
        if self.unreachable:
            bad.append("%d unreachable" % len(self.unreachable))
        counts = ", ".join("%s %d" % (k, self.counts[k]) for k in ("ok", "changed", "skipped") if self.counts[k])
        return "%s: %s%s%s" % (self.name, plural(hosts, "host"), (" (%s)" % ", ".join(bad)) if bad else ", all ok",
                               (" | %s results" % counts) if counts else "")


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "fleetqual.storage.bounded"

    def __init__(self):
        super().__init__()
        self._tally = None
        self._warnings = collections.OrderedDict()   # task name -> [hosts, first warning, count]

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        if not self._verbose():
            # Task banners are deferred by the default callback only while it hides ok and
            # skipped hosts: a banner is printed above a failure, never above nothing.
            for key in PER_HOST_OPTIONS:
                self._plugin_options[key] = False

    def _verbose(self):
        return self._display.verbosity >= 1

    # ------------------------------------------------------------------ counting
    def _count(self, result, kind):
        if self._tally is None:
            return
        host = result.host.get_name()
        self._tally.hosts.add(host)
        if kind == "failed":
            self._tally.failed.add(host)
        elif kind == "unreachable":
            self._tally.unreachable.add(host)
        else:
            self._tally.counts[kind] += 1

    def _keep_warnings(self, result):
        """Warnings of a result that is not printed: kept per task, shown at the end. Read
        from the result's ``warnings``, not from ``result.result``, whose first access copies
        the whole result into native types (the start's plan and drives, the record: a
        large part of the controller's CPU per host, issue 18)."""
        warnings = result.warnings
        if not warnings:
            return
        name = result.task.get_name().strip() or result.task.action
        entry = self._warnings.setdefault(name, [set(), warning_text(warnings[0]), 0])
        entry[0].add(result.host.get_name())
        entry[2] += len(warnings)

    def _end_play(self):
        if self._tally is not None and self._tally.hosts and not self._verbose():
            colour = C.COLOR_ERROR if self._tally.failed or self._tally.unreachable else C.COLOR_OK
            self._display.display(self._tally.line(), color=colour)
        self._tally = None

    # ------------------------------------------------------------------ results
    def v2_runner_on_ok(self, result):
        self._count(result, "changed" if result.is_changed() else "ok")
        if self._verbose():
            return super().v2_runner_on_ok(result)
        if isinstance(result.task, TaskInclude):
            return None
        self._keep_warnings(result)
        return None

    def v2_runner_on_skipped(self, result):
        self._count(result, "skipped")
        if self._verbose():
            return super().v2_runner_on_skipped(result)
        return None

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count(result, "ok" if ignore_errors else "failed")
        return super().v2_runner_on_failed(result, ignore_errors=ignore_errors)

    def v2_runner_on_unreachable(self, result):
        self._count(result, "unreachable")
        return super().v2_runner_on_unreachable(result)

    def v2_runner_item_on_ok(self, result):
        if self._verbose():
            return super().v2_runner_item_on_ok(result)
        self._keep_warnings(result)
        return None

    # a line per host (or per host group) for something that went well: only with -v
    v2_runner_item_on_skipped = only_verbose("v2_runner_item_on_skipped")
    v2_runner_retry = only_verbose("v2_runner_retry")
    v2_playbook_on_include = only_verbose("v2_playbook_on_include")

    # ------------------------------------------------------------------ plays and recap
    def v2_playbook_on_play_start(self, play):
        self._end_play()
        super().v2_playbook_on_play_start(play)
        self._tally = PlayTally(play.get_name().strip() or "play")

    def _print_warnings(self):
        limit = int(self.get_option("warning_tasks"))
        items = list(self._warnings.items())
        for name, (hosts, first, count) in items[:limit]:
            self._display.display("[WARNING]: %s: %s (%s, %s)" % (name, first, plural(count, "warning"),
                                                                  plural(len(hosts), "host")),
                                  color=C.COLOR_WARN, stderr=True)
        if len(items) > limit:
            self._display.display("[WARNING]: ... and warnings of %s more (run with -v to see every one)"
                                  % plural(len(items) - limit, "task"), color=C.COLOR_WARN, stderr=True)

    def v2_playbook_on_stats(self, stats):
        self._end_play()
        if self._verbose():
            return super().v2_playbook_on_stats(stats)
        self._print_warnings()
        self._display.banner("PLAY RECAP")
        totals = collections.Counter()
        others = 0
        for host in sorted(stats.processed.keys()):
            t = stats.summarize(host)
            if t["failures"] or t["unreachable"]:
                self._display.display("%s : %s" % (host, " ".join("%s=%d" % (k if k != "failures" else "failed", t[k])
                                                                  for k in RECAP_KEYS)),
                                      color=C.COLOR_ERROR if t["failures"] else C.COLOR_UNREACHABLE)
            else:
                others += 1
                totals.update({k: t[k] for k in RECAP_KEYS})
        if others:
            self._display.display("%s without a failure : %s" % (
                plural(others, "host"), " ".join("%s=%d" % (k if k != "failures" else "failed", totals[k])
                                                 for k in RECAP_KEYS)), color=C.COLOR_OK)
        self._display.display("", screen_only=True)
        if stats.custom and self.get_option("show_custom_stats"):
            self._display.banner("CUSTOM STATS: ")
            for k in sorted(stats.custom.keys()):
                if k != "_run":
                    self._display.display("\t%s: %s" % (k, self._dump_results(stats.custom[k], indent=1).replace("\n", "")))
            if "_run" in stats.custom:
                self._display.display("\tRUN: %s" % self._dump_results(stats.custom["_run"], indent=1).replace("\n", ""))
        return None
