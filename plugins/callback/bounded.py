# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: bounded
type: stdout
short_description: Output that does not grow with the fleet; every failure in one bounded line
version_added: "0.2.0"
description:
  - The default callback (P(ansible.builtin.default#callback)), except that what went well is counted
    instead of printed host by host, so a passing run over 1,000 hosts prints as many lines as
    one over a single host.
  - Not printed (counted) - ok, changed and skipped results, loop items, C(included) lines and
    retries. The task banner appears only above something printed.
  - Printed under the task's banner - every failed task of every host (also one a C(block)'s
    C(rescue) records, so the reason of an C(ERROR) verdict is on screen) and every unreachable
    host - its message (with a command's return code and its stderr), at most O(failure_lines)
    lines of O(failure_chars) characters. The collection's own tasks print one line, the verdict
    and the first reasons, and name the host record that holds everything,
    C(<results>/<run_id>/<host>.json); C(-v) prints a failed task's whole result.
  - Not printed for a failed task - ansible-core's C([ERROR]) block (the same message again, and
    where the task is), and the warnings that a failed file transfer leaves (C(sftp transfer
    mechanism failed), C(scp ...)), as the failure's line says the reason. Its other warnings are
    counted with those of the results not printed.
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
  failure_chars:
    description: At most this many characters of each line of a failed task's or an unreachable host's message.
    type: int
    default: 500
    ini:
      - section: fleetqual_bounded
        key: failure_chars
    env:
      - name: FLEETQUAL_BOUNDED_FAILURE_CHARS
  failure_lines:
    description: At most this many lines of a failed task's or an unreachable host's message (with C(-v), all of them).
    type: int
    default: 20
    ini:
      - section: fleetqual_bounded
        key: failure_lines
    env:
      - name: FLEETQUAL_BOUNDED_FAILURE_LINES
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

from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import brief

# the default callback's options that print a line per host for what went well
PER_HOST_OPTIONS = ("display_ok_hosts", "display_skipped_hosts", "show_per_host_start")
RECAP_KEYS = ("ok", "changed", "unreachable", "failures", "skipped", "rescued", "ignored")
# warnings a failed transfer leaves (the ssh connection's sftp, then scp, then piped): the
# failure's own line gives the reason
TRANSFER_WARNING = "transfer mechanism failed"
# what a failed result says beside its msg, in this order (command, shell, a module that crashed)
DETAIL_KEYS = ("stderr", "module_stderr", "stdout", "module_stdout")


def plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def warning_text(warning):
    """The message of a warning (a 2.19 WarningSummary, or a string from older results)."""
    event = getattr(warning, "event", None)
    msg = getattr(event, "msg", None) if event is not None else None
    return str(msg if msg is not None else warning).strip()


def failure_text(result, chars, max_lines):
    """What a failed result (or an unreachable host) says: its ``msg`` (a command's return code
    added), then what it printed (``stderr``, ...), at most ``max_lines`` lines of at most
    ``chars`` characters each, the last one saying how much more ``-v`` prints (brief.note).
    The collection's own failures are one line (plugin_utils/report/brief.py)."""
    msg = str(result.get("msg") or "").strip() or "failed"
    if result.get("rc") not in (None, 0):
        msg = "%s (rc %s)" % (msg, result["rc"])
    lines = msg.splitlines()
    for key in DETAIL_KEYS:
        value = str(result.get(key) or "").strip()
        if value and value not in msg:
            lines.append("%s: %s" % (key, value))
            break
    lines = [ln for ln in "\n".join(lines).splitlines() if ln.strip()]
    shown, any_cut = [], False
    for line in lines[:max(1, max_lines)]:
        line, was_cut = brief.cut(line, chars)
        shown.append(line)
        any_cut = any_cut or was_cut
    tail = brief.note(len(lines) - len(shown), any_cut, "the -v output")
    if tail:
        shown[-1] += " " + tail
    return "\n".join(shown)


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

    def _keep_warnings(self, result, failed=False):
        """Warnings of a result that is not printed: kept per task, shown at the end. Read
        from the result's ``warnings``, not from ``result.result``, whose first access copies
        the whole result into native types (the start's plan and drives, the record: a
        large part of the controller's CPU per host). Of a failed result, the
        warnings of a failed transfer are dropped: the failure's line says why."""
        warnings = result.warnings
        if failed:
            warnings = [w for w in warnings or [] if TRANSFER_WARNING not in warning_text(w)]
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

    def _failure_line(self, result, kind):
        """``fatal: [host]: FAILED! => <one bounded line>`` under the task's banner."""
        if self._last_task_banner != result.task._uuid:
            self._print_task_banner(result.task)
        self._keep_warnings(result, failed=True)
        if kind == "item":
            head = "failed: [%s] (item=%s)" % (self.host_label(result), self._get_item_label(result.result))
        else:
            head = "fatal: [%s]: %s" % (self.host_label(result), "UNREACHABLE!" if kind == "unreachable" else "FAILED!")
        text = failure_text(result.result, int(self.get_option("failure_chars")), int(self.get_option("failure_lines")))
        self._display.display("%s => %s" % (head, text),
                              color=C.COLOR_UNREACHABLE if kind == "unreachable" else C.COLOR_ERROR,
                              stderr=self.get_option("display_failed_stderr"))

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count(result, "ok" if ignore_errors else "failed")
        if self._verbose():
            return super().v2_runner_on_failed(result, ignore_errors=ignore_errors)
        if result.task.loop and "results" in result.result:
            pass   # each failed item was printed by v2_runner_item_on_failed
        else:
            self._failure_line(result, "failed")
        if ignore_errors:
            self._display.display("...ignoring", color=C.COLOR_SKIP)
        return None

    def v2_runner_on_unreachable(self, result):
        self._count(result, "unreachable")
        if self._verbose():
            return super().v2_runner_on_unreachable(result)
        self._failure_line(result, "unreachable")
        if result.task.ignore_unreachable:
            self._display.display("...ignoring", color=C.COLOR_SKIP)
        return None

    def v2_runner_item_on_failed(self, result):
        if self._verbose():
            return super().v2_runner_item_on_failed(result)
        self._failure_line(result, "item")
        return None

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
