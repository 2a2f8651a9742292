# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: qualify_report
type: aggregate
short_description: Fleet report of a storage qualification run (table, JSON, JUnit, HTML, Markdown)
version_added: 0.1.0
description:
  - At the end of the playbook, reads the per-host records that the C(fleetqual.storage.qualify)
    role hands over with C(ansible.builtin.set_stats) (key C(fleetqual_report), C(per_host=true)) and
    what the play saw for every targeted host (unreachable, failed tasks).
  - Prints a fleet table (past O(table_max_hosts) hosts only those that did not pass) and a one-line summary
    (N/M hosts passed, counts per verdict), and writes C(fleet.json),
    C(junit.xml), C(report.html) and C(report.md) into C(<output_dir>/<run_id>/).
  - Hosts without a record are reported as C(UNREACHABLE) (unreachable) or C(ERROR) (a task failed,
    with the task name and message, or the role never completed); they are never missing and never C(PASS).
  - A host whose record says C(PASS) but which afterwards failed a task or became unreachable is
    reported as C(ERROR) (its measurements are kept, C(record_verdict) stays C(PASS)).
    Hosts whose record verdict is C(FAIL) or C(ERROR) keep it, including when the playbook's final
    verdict gate fails them.
  - Flags fleet outliers within groups of like hosts (robust MAD score or percentage worse than the
    group median) and regressions against a baseline C(fleet.json). With C(fail) they turn C(PASS)
    hosts into C(FAIL); the final verdict of every host is decided by one function
    (plugin_utils/judge/verdict.py) which the playbook's verdict gate also uses (through the action
    M(fleetqual.storage.fleet_verdicts), with these options), so the report and the exit code agree.
  - Only observes the play and renders the report; it sets no variable. Its options are also read by
    the actions M(fleetqual.storage.fleet_verdicts) and M(fleetqual.storage.fleet_report).
  - Stores every host's summary in C(<output_dir>/<run_id>/fleet.d/) and writes C(not-passed.limit)
    (the hosts to re-run with C(--limit @file)). C(playbooks/report.yml) (C(fleetqual.storage.report),
    action M(fleetqual.storage.fleet_report)) renders every format of a whole run from every host stored
    in its run directory (slices, controllers, re-runs), outliers judged over the whole fleet, percentiles
    merged from the histograms.
  - Optionally appends to C(<output_dir>/history.jsonl) and writes a Prometheus textfile for the
    node_exporter textfile collector.
  - See docs/report.md in the collection for the fleet.json schema.
requirements:
  - enable in ansible.cfg (C(callbacks_enabled = fleetqual.storage.qualify_report))
options:
  output_dir:
    description:
      - Results directory; files go to C(<output_dir>/<run_id>/).
      - Default is the directory the role used (parent of the run directory of the records' C(results_file)),
        else C($FLEETQUAL_RESULTS_DIR), else C(results) in the current directory (the default of the role's
        C(fleetqual_results_dir)).
    type: path
    ini:
      - section: fleetqual_report
        key: output_dir
    env:
      - name: FLEETQUAL_REPORT_DIR
  formats:
    description: Outputs to produce.
    type: list
    elements: str
    default: [table, json, junit, html, md]
    ini:
      - section: fleetqual_report
        key: formats
    env:
      - name: FLEETQUAL_REPORT_FORMATS
  outliers:
    description:
      - What fleet outliers do. C(warn) lists them; C(fail) also turns a C(PASS) host with an outlier in
        the bad direction (IOPS low, p99 high) into C(FAIL) in the report; C(off) skips the analysis.
    type: str
    choices: [warn, fail, 'off']
    default: warn
    ini:
      - section: fleetqual_report
        key: outliers
    env:
      - name: FLEETQUAL_REPORT_OUTLIERS
  regressions:
    description:
      - What regressions against the baseline do (C(warn), C(fail) as for O(outliers), C(off)).
    type: str
    choices: [warn, fail, 'off']
    default: warn
    ini:
      - section: fleetqual_report
        key: regressions
    env:
      - name: FLEETQUAL_REPORT_REGRESSIONS
  drives:
    description:
      - What drive consistency findings do (plugin_utils/fleet/drive_consistency.py, over the hosts whose record carries
        a drive inventory). Within a group of like hosts, a drive whose model or firmware differs from the
        group's, a host with fewer drives or less capacity, and each drive's results against the same drive
        model across the fleet. C(warn) lists them; C(fail) also turns a C(PASS) host into C(FAIL); C(off)
        skips them. A drive whose own SMART/NVMe verdict is failed fails its host in the judge, whatever this
        option says.
    type: str
    choices: [warn, fail, 'off']
    default: warn
    ini:
      - section: fleetqual_report
        key: drives
    env:
      - name: FLEETQUAL_REPORT_DRIVES
  baseline:
    description: An earlier C(fleet.json) (or the run directory holding it) to compare against.
    type: path
    ini:
      - section: fleetqual_report
        key: baseline
    env:
      - name: FLEETQUAL_REPORT_BASELINE
  outlier_mad_score:
    description: Robust score C(|x - median| / (1.4826 * MAD)) above which a value is an outlier.
    type: float
    default: 3.5
    ini:
      - section: fleetqual_report
        key: outlier_mad_score
    env:
      - name: FLEETQUAL_REPORT_OUTLIER_MAD_SCORE
  outlier_pct_below:
    description: Percentage worse than the group median (IOPS below, p99 latency above) that makes an outlier.
    type: float
    default: 20.0
    ini:
      - section: fleetqual_report
        key: outlier_pct_below
    env:
      - name: FLEETQUAL_REPORT_OUTLIER_PCT_BELOW
  outlier_min_diff_ms:
    description:
      - Smallest difference from the group median, in ms, that can make a latency (p50, p99) an outlier,
        whatever its score or percentage.
      - Below it two hosts' latencies differ by scheduling and timer noise, not by their storage.
    type: float
    default: 0.1
    ini:
      - section: fleetqual_report
        key: outlier_min_diff_ms
    env:
      - name: FLEETQUAL_REPORT_OUTLIER_MIN_DIFF_MS
  regression_tolerance_pct:
    description: IOPS drop or p99 latency rise against the baseline, in percent, tolerated before a regression is flagged.
    type: float
    default: 10.0
    ini:
      - section: fleetqual_report
        key: regression_tolerance_pct
    env:
      - name: FLEETQUAL_REPORT_REGRESSION_TOLERANCE_PCT
  history:
    description: Append one line per host to C(<output_dir>/history.jsonl).
    type: bool
    default: true
    ini:
      - section: fleetqual_report
        key: history
    env:
      - name: FLEETQUAL_REPORT_HISTORY
  prometheus_textfile:
    description:
      - Path of a Prometheus textfile (for example C(/var/lib/node_exporter/textfile/fleetqual.prom)),
        written atomically. Not written when unset.
    type: path
    ini:
      - section: fleetqual_report
        key: prometheus_textfile
    env:
      - name: FLEETQUAL_REPORT_PROMETHEUS_TEXTFILE
  table_width:
    description: Maximum width of the terminal table.
    type: int
    default: 110
    ini:
      - section: fleetqual_report
        key: table_width
    env:
      - name: FLEETQUAL_REPORT_TABLE_WIDTH
  table_max_hosts:
    description:
      - Bounds what the terminal gets of the fleet (format C(table)). When the fleet has more hosts than this,
        the fleet table lists only the hosts whose verdict is not C(PASS) (every row of each, in full) and one
        line counting the C(PASS) hosts left out; the drive table only the flagged drives (failed, or with a
        finding); the diagnostics only those of the hosts that did not pass, the C(PASS) hosts' counted in one
        line. Every host stays in C(fleet.json), C(report.html) and C(report.md).
      - C(0) lists only the hosts that did not pass whatever the fleet's size, so a passing run prints as many
        lines for 1,000 hosts as for one (with the stdout callback C(fleetqual.storage.bounded)).
      - Unset (the default) lists every host. A negative number is ignored with a warning.
    type: int
    version_added: "0.2.0"
    ini:
      - section: fleetqual_report
        key: table_max_hosts
    env:
      - name: FLEETQUAL_REPORT_TABLE_MAX_HOSTS
  html_detail_hosts:
    description:
      - Hosts given full detail (every check and metric, iostat series) in fleet.json and drawn with per-host
        charts in report.html, non-passing and outlier hosts first; the others keep a summary (their verdict,
        reasons and each workload's figures).
    type: int
    default: 100
    ini:
      - section: fleetqual_report
        key: html_detail_hosts
    env:
      - name: FLEETQUAL_REPORT_HTML_DETAIL_HOSTS
"""

EXAMPLES = r"""
# ansible.cfg
# [defaults]
# callbacks_enabled = fleetqual.storage.qualify_report
# [fleetqual_report]
# formats = table,json,junit,html,md
# table_max_hosts = 0
# outliers = warn
# baseline = results/20261101T020000Z/fleet.json
# prometheus_textfile = /var/lib/node_exporter/textfile/fleetqual.prom
"""

import os
import traceback

from ansible.plugins.callback import CallbackBase

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleetmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import publish as reportmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import config as report_config
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import run_store
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import fleet_json
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import interrupt

RECORD_KEY = "fleetqual_report"
# the actions that start, wait on or hand over a host's measurement job (remote/interrupt.py)
JOB_ACTIONS = ("qualify_host", "lockstep", "job")
COLLECTION = "fleetqual.storage."


def action_is(task, names):
    """Whether ``task`` runs one of the collection's actions ``names`` (short or fully qualified)."""
    action = str(getattr(task, "action", ""))
    return any(action in (n, COLLECTION + n) for n in names)


class CallbackModule(CallbackBase):
    """Thin glue: collect what the play saw, hand it to plugin_utils.fleet / report."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "fleetqual.storage.qualify_report"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display=display)
        self._hosts = {}          # host -> inventory groups, every host a play targeted
        self._failed = {}         # host -> [{task, msg}] (not ignored)
        self._unreachable = {}    # host -> [{task, msg}]
        self.last_fleet = None
        self.written = {}
        self._validating = False  # inside the playbook's input-validation play
        self._refused = []        # [{task, msg}] failures of that play: inputs refused
        self._gating = False      # inside the verdict-gate play: its failures are the verdicts
        self._merging = False     # playbooks/report.yml ran: its action reported the run, no fleet here
        self._gate_failures = {}  # host -> failures in the gate play (not counted as outcomes)
        self._signal_stop = None  # Ctrl-C and SIGTERM stop the jobs this run started (remote/interrupt.py)
        self._measuring = False   # in the play that measures (no _fleetqual_report_play)

    @staticmethod
    def _play_role(play):
        try:
            return (play.vars or {}).get("_fleetqual_report_play")
        except Exception:  # pragma: no cover - defensive
            return None

    # ------------------------------------------------------------------ events
    def v2_playbook_on_start(self, playbook):
        try:
            self._signal_stop = interrupt.SignalStop()
            self._signal_stop.install()
        except Exception as exc:  # pragma: no cover - never break the run for it
            self._display.warning("fleetqual.storage.qualify_report: Ctrl-C will not stop the jobs: %s" % exc)

    def _job_event(self, result, ok):
        """Follow the jobs this run started (the qualify_host start) and collected (its wait)."""
        if self._signal_stop is None:
            return
        task = getattr(result, "task", None) or getattr(result, "_task", None)
        if task is None or not action_is(task, ("qualify_host",)):
            return
        name = self._event(result)[0]
        state = (getattr(task, "args", None) or {}).get("state")
        try:
            data = result.result
        except AttributeError:  # pragma: no cover - pre-2.19 shape
            data = getattr(result, "_result", {}) or {}
        status = data.get("status") if isinstance(data, dict) else None
        if state == "started" and ok and isinstance(status, dict) and status.get("pid"):
            self._signal_stop.started(name, status.get("run_id"))
        elif state in ("finished", "failed"):
            # collected (judged, cleaned up, stored), or recorded as the host's error
            self._signal_stop.ended(name)

    def v2_runner_on_ok(self, result):
        self._job_event(result, True)

    def v2_playbook_on_task_start(self, task, is_conditional):
        # from the first task that starts, waits on or hands over a measurement job on, the
        # first Ctrl-C stops the jobs and the run reports them; before it (the build on the
        # controller, a playbook of its own that only uses this callback) nothing runs on a
        # host, and the signal ends the run as Ansible does
        if self._signal_stop is not None and self._measuring and action_is(task, JOB_ACTIONS):
            self._signal_stop.armed = True

    def v2_playbook_on_play_start(self, play):
        # The validation play runs on the controller before any host is contacted: its
        # hosts are not fleet members and its failures mean the inputs were refused.
        role = self._play_role(play)
        self._validating = role == "validation"
        self._gating = role == "gate"
        self._measuring = role is None
        if self._signal_stop is not None:
            # armed by the play's first job task (v2_playbook_on_task_start); until then, and
            # in any other play, Ansible's own handling of the signal (remote/interrupt.py)
            self._signal_stop.armed = False
        if self._validating:
            return
        if role in ("merge", "stop"):
            # playbooks/report.yml reported the run itself; playbooks/stop.yml measures nothing
            self._merging = True
            return
        try:
            inventory = play.get_variable_manager()._inventory
            hosts = inventory.get_hosts(play.hosts)
        except Exception:  # pragma: no cover - defensive: never break the run for the report
            hosts = []
        for host in hosts:
            if getattr(host, "implicit", False):
                # implicit localhost (not in inventory): part of the fleet only if it
                # delivers a record or fails; see docs/report.md
                continue
            name = host.get_name()
            if name not in self._hosts:
                try:
                    groups = [g.get_name() if hasattr(g, "get_name") else str(g) for g in host.get_groups()]
                except Exception:  # pragma: no cover
                    groups = []
                self._hosts[name] = groups

    @staticmethod
    def _event(result):
        host = getattr(result, "host", None) or getattr(result, "_host", None)
        name = host.get_name() if host is not None else "?"
        try:
            data = result.result
        except AttributeError:  # pragma: no cover - pre-2.19 shape
            data = getattr(result, "_result", {}) or {}
        task = getattr(result, "task_name", None) or ""
        if not task:
            try:
                task = result.task.get_name()
            except Exception:  # pragma: no cover
                task = "?"
        msg = data.get("msg") or data.get("stderr") or data.get("reason") or ""
        if not msg and isinstance(data.get("results"), list):
            for item in data["results"]:
                if isinstance(item, dict) and item.get("failed"):
                    msg = item.get("msg") or item.get("stderr") or ""
                    break
        return name, {"task": str(task), "msg": str(msg or "failed")}

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._job_event(result, False)
        if ignore_errors:
            return
        name, ev = self._event(result)
        if self._validating:
            self._refused.append(ev)
            return
        if self._gating:
            # the gate only carries out verdict.final_verdict: not an outcome of its own
            self._gate_failures[name] = self._gate_failures.get(name, 0) + 1
            return
        self._failed.setdefault(name, []).append(ev)

    def v2_runner_on_unreachable(self, result):
        name, ev = self._event(result)
        self._unreachable.setdefault(name, []).append(ev)

    # ------------------------------------------------------------------ end
    def _play_outcome(self, stats):
        names = set(self._failed) | set(self._unreachable) | set(self._hosts)
        play = {}
        for name in names:
            summary = dict(stats.summarize(name))
            if self._gate_failures.get(name):
                summary["failures"] = max(0, int(summary.get("failures") or 0) - self._gate_failures[name])
            dark = self._unreachable.get(name, [])
            play[name] = {
                "counts": summary,
                # stats.failures excludes rescued failures; events carry the task and message
                "failed": self._failed.get(name, []) if summary.get("failures") else [],
                "unreachable": dark if summary.get("unreachable") else [],
                # unreachable under ignore_unreachable (ansible counts it ok and ignored): the
                # role's start, which then ends the host so that the rest of its batch goes on
                "unreachable_ignored": [] if summary.get("unreachable") else dark,
            }
        return play

    def v2_playbook_on_stats(self, stats):
        if self._merging:
            # playbooks/report.yml: its action (fleetqual.storage.fleet_report) reported the
            # run; its own play (on the controller) is not a fleet
            return
        try:
            self._report(stats)
        except Exception as exc:  # keep the playbook's own outcome; say why there is no report
            self._display.warning("fleetqual.storage.qualify_report: could not build the fleet report: %s" % exc)
            self._display.vvv(traceback.format_exc())

    def _report(self, stats):
        records = {}
        for host, custom in (stats.custom or {}).items():
            if host == "_run" or not isinstance(custom, dict):
                continue
            rec = custom.get(RECORD_KEY)
            if isinstance(rec, dict):
                records[str(host)] = rec

        if self._refused and not records:
            # Nothing was qualified: write no report (it would list hosts never contacted).
            self._display.display(
                "fleet: no host qualified: the inputs were refused before any host was contacted (%s)"
                % self._refused[0]["msg"].splitlines()[0][:300], color="red")
            return

        opts, baseline, notes = self._options_and_baseline()
        root = self.get_option("output_dir") or fleet_json.results_root(records) or report_config.default_results_dir()
        run_id = run_store.pick_run_id(records.values())
        run_dir = os.path.join(root, run_id)
        slices = sorted({"%s" % (r.get("slice") or {}).get("number") for r in records.values()
                         if isinstance(r.get("slice"), dict) and r["slice"].get("number") is not None})
        # the hosts' summaries (fleet.d/), for playbooks/report.yml's merge of every slice,
        # controller and re-run of this run id
        sink = run_store.EntryWriter(run_dir, "slice-%s" % slices[0] if len(slices) == 1 else "run")
        try:
            fleet = fleetmod.aggregate(records, play=self._play_outcome(stats), inventory=self._hosts,
                                       options=opts, baseline=baseline, run_id=run_id, entry_sink=sink,
                                       detail_hosts=int(self.get_option("html_detail_hosts") or 0))
        except BaseException:
            sink.abort()
            raise
        sink.close()
        fleet["notes"].extend(notes)
        self.last_fleet = fleet
        if len(slices) == 1 and any((r.get("slice") or {}).get("count") not in (None, 1, "1")
                                    for r in records.values()):
            # one slice of a sliced run: its own report beside the others'; the run's report
            # over every slice is playbooks/report.yml's
            run_dir = os.path.join(run_dir, "slice-%s" % slices[0])
        self._emit(fleet, root, run_dir)

    def _options_and_baseline(self):
        opts, baseline, notes = report_config.options_and_baseline(self.get_option)
        for note in notes:
            self._display.warning("fleetqual.storage.qualify_report: %s" % note)
        return opts, baseline, notes

    def _emit(self, fleet, root, run_dir):
        """Terminal table, every file format, history and the Prometheus textfile."""
        self.written = reportmod.publish(fleet, root, run_dir, self.get_option, self._display)
