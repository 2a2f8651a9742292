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
  - Prints a fleet table and a one-line summary (N/M hosts passed, counts per verdict), and writes C(fleet.json),
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
    (plugin_utils/verdict.py) which the playbook's verdict gate also uses (the callback hands the gate
    play the verdicts when it starts), so the report and the exit code agree.
  - Stores every host's summary in C(<output_dir>/<run_id>/fleet.d/) and writes C(not-passed.limit)
    (the hosts to re-run with C(--limit @file)). With C(playbooks/report.yml) (C(fleetqual.storage.report)),
    renders every format of a whole run from every host stored in its run directory (slices,
    controllers, re-runs), outliers judged over the whole fleet, percentiles merged from the histograms.
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
        else C(./results).
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
      - What drive consistency findings do (plugin_utils/drive_consistency.py, over the hosts whose record carries
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
# outliers = warn
# baseline = results/20261101T020000Z/fleet.json
# prometheus_textfile = /var/lib/node_exporter/textfile/fleetqual.prom
"""

import os
import traceback

from ansible.plugins.callback import CallbackBase

from ansible_collections.fleetqual.storage.plugins.plugin_utils import baseline as baselinemod
from ansible_collections.fleetqual.storage.plugins.plugin_utils import fleet as fleetmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils import fleet_hosts
from ansible_collections.fleetqual.storage.plugins.plugin_utils import fleet_summary
from ansible_collections.fleetqual.storage.plugins.plugin_utils import prometheus
from ansible_collections.fleetqual.storage.plugins.plugin_utils import render_text
from ansible_collections.fleetqual.storage.plugins.plugin_utils import report as reportmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils import report_rows
from ansible_collections.fleetqual.storage.plugins.plugin_utils import run_store

RECORD_KEY = "fleetqual_report"


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
        self._gate_entries = {}   # host -> fleet entry of the record set_stats handed over (for the gate)
        self._gating = False      # inside the verdict-gate play: its failures are the verdicts
        self._merged = None       # fleet of a merge play (playbooks/report.yml)
        self._gate_failures = {}  # host -> failures in the gate play (not counted as outcomes)

    @staticmethod
    def _play_role(play):
        try:
            return (play.vars or {}).get("_fleetqual_report_play")
        except Exception:  # pragma: no cover - defensive
            return None

    # ------------------------------------------------------------------ events
    def v2_playbook_on_play_start(self, play):
        # The validation play runs on the controller before any host is contacted: its
        # hosts are not fleet members and its failures mean the inputs were refused.
        role = self._play_role(play)
        self._validating = role == "validation"
        self._gating = role == "gate"
        if self._validating:
            return
        if role == "gate":
            self._hand_verdicts_to_gate(play)
        if role == "merge":
            self._merge_run(play)
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

    def v2_runner_on_ok(self, result):
        # the record a host hands over with set_stats, kept for the verdict gate
        try:
            data = result.result
        except AttributeError:  # pragma: no cover - pre-2.19 shape
            data = getattr(result, "_result", {}) or {}
        stats = data.get("ansible_stats") if isinstance(data, dict) else None
        if isinstance(stats, dict) and isinstance(stats.get("data"), dict):
            rec = stats["data"].get(RECORD_KEY)
            if isinstance(rec, dict):
                name, _event_data = self._event(result)
                try:
                    # a summary, not the record (stats.custom holds that already)
                    self._gate_entries[name] = fleet_hosts.build_host(name, rec, keep_detail=False)
                except Exception as exc:  # pragma: no cover - never break the run for the report
                    self._display.vvv("fleetqual.storage.qualify_report: %s" % exc)

    def v2_runner_on_failed(self, result, ignore_errors=False):
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
    def _report_options(self):
        opts = {}
        for key in ("outliers", "regressions", "drives", "outlier_mad_score", "outlier_pct_below",
                    "regression_tolerance_pct", "baseline"):
            opts[key] = self.get_option(key)
        return opts

    def _play_outcome(self, stats):
        names = set(self._failed) | set(self._unreachable) | set(self._hosts)
        play = {}
        for name in names:
            summary = dict(stats.summarize(name))
            if self._gate_failures.get(name):
                summary["failures"] = max(0, int(summary.get("failures") or 0) - self._gate_failures[name])
            play[name] = {
                "counts": summary,
                # stats.failures excludes rescued failures; events carry the task and message
                "failed": self._failed.get(name, []) if summary.get("failures") else [],
                "unreachable": self._unreachable.get(name, []) if summary.get("unreachable") else [],
            }
        return play

    def _hand_verdicts_to_gate(self, play):
        """Give the gate play every host's final verdict as play variable
        ``_fleetqual_final`` ({host: {verdict, reasons}}): the records of this run judged
        with the fleet judgements (outliers, regressions, drives) by verdict.final_verdict."""
        try:
            opts, baseline, _notes = self._options_and_baseline()
            entries, self._gate_entries = list(self._gate_entries.values()), {}
            fleet = fleetmod.aggregate({}, entries=entries, options=opts, baseline=baseline, detail_hosts=0)
            play.vars["_fleetqual_final"] = {h["host"]: {"verdict": h["verdict"], "reasons": h["reasons"]}
                                             for h in fleet["hosts"]}
        except Exception as exc:  # the gate falls back to the record verdicts
            self._display.warning("fleetqual.storage.qualify_report: no fleet verdicts for the gate: %s" % exc)
            self._display.vvv(traceback.format_exc())

    def _merge_run(self, play):
        """playbooks/report.yml: render every format from every host record stored in the
        run directory, and give the play the run's summary (``_fleetqual_merged``)."""
        try:
            extra = play.get_variable_manager().extra_vars
            run_id = extra.get("fleetqual_run_id")
            if not run_id:
                raise ValueError("fleetqual_run_id is not set: pass -e fleetqual_run_id=<run id>")
            root = extra.get("fleetqual_results_dir") or self.get_option("output_dir") \
                or os.environ.get("FLEETQUAL_RESULTS_DIR") or os.path.join(os.getcwd(), "results")
            run_dir = os.path.join(str(root), str(run_id))
            if not os.path.isdir(run_dir):
                raise ValueError("no run directory %s (fleetqual_results_dir=%s, fleetqual_run_id=%s)"
                                 % (run_dir, root, run_id))
            opts, baseline, notes = self._options_and_baseline()
            detail = int(self.get_option("html_detail_hosts") or 0)
            fleet = run_store.aggregate_run(run_dir, options=opts, baseline=baseline, detail_hosts=detail)
            fleet["notes"].extend(notes)
            self._merged = fleet
            # history.jsonl: each qualify run (slice, re-run) appended its own hosts already
            self._emit(fleet, str(root), run_dir, history=False)
            summary = fleet_summary.run_summary(fleet)
            summary["run_dir"] = run_dir
            summary["limit_file"] = self.written.get("limit")
            play.vars["_fleetqual_merged"] = summary
        except Exception as exc:
            self._merged = {}
            play.vars["_fleetqual_merged"] = {"error": str(exc)}
            self._display.warning("fleetqual.storage.qualify_report: could not merge the run: %s" % exc)
            self._display.vvv(traceback.format_exc())

    def v2_playbook_on_stats(self, stats):
        if self._merged is not None:
            # playbooks/report.yml: the run was reported when its play started; its own
            # play (on the controller) is not a fleet
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
        root = self.get_option("output_dir") or run_store.results_root(records, default="results")
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
        opts = self._report_options()
        baseline = None
        notes = []
        if opts.get("baseline"):
            try:
                baseline = baselinemod.load_baseline(opts["baseline"])
            except (OSError, ValueError) as exc:
                notes.append("baseline not used: %s" % exc)
                self._display.warning("fleetqual.storage.qualify_report: baseline not used: %s" % exc)
        return opts, baseline, notes

    def _emit(self, fleet, root, run_dir, history=True):
        """Terminal table, every file format, history and the Prometheus textfile."""
        formats = [str(f).strip().lower() for f in (self.get_option("formats") or []) if str(f).strip()]
        unknown = [f for f in formats if f not in reportmod.FORMATS]
        if unknown:
            self._display.warning("fleetqual.storage.qualify_report: unknown formats ignored: %s" % ", ".join(unknown))

        width = int(self.get_option("table_width") or 110)
        rows = report_rows.table_rows(fleet)
        if "table" in formats:
            self._display.banner("FLEET REPORT [%s]" % fleet["run_id"])
            self._display.display(render_text.render_table(fleet, width=width, rows=rows))
            drives = render_text.render_drive_table(fleet, width=width)
            if drives:
                self._display.display("drives (%s):" % fleet["options"]["drives"])
                self._display.display(drives)
            for line in render_text.detail_lines(fleet, width=width):
                self._display.display(line)

        self.written = reportmod.write_reports(fleet, run_dir, formats, rows=rows,
                                               detail_hosts=int(self.get_option("html_detail_hosts") or 0))
        if history and self.get_option("history"):
            self.written["history"] = baselinemod.append_history(os.path.join(root, "history.jsonl"), fleet)
        prom = self.get_option("prometheus_textfile")
        if prom:
            self.written["prometheus"] = prometheus.write_prometheus(prom, fleet)

        colour = "green" if fleet["summary"]["passed"] == fleet["summary"]["hosts"] and fleet["hosts"] else "red"
        self._display.display(report_rows.summary_line(fleet), color=colour)
        if self.written:
            self._display.display("fleet report: %s" % ", ".join(
                self.written[k] for k in ("json", "junit", "html", "md", "limit", "history", "prometheus")
                if k in self.written))
