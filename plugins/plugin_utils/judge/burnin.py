# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The burn-in's own judgements (docs/integrity.md, profile ``burnin``), called by the judge
for a host whose plan has burn-in rounds (workloads marked ``burnin``, module_utils/plan/burnin.py):

* **Drive health before and after.** The start reads each drive's health
  (``fleetqual.storage.drives``); the cleanup reads it again (``host_start.cleanup`` with
  ``health_after``). A counter that rose during the run FAILS the host (``rule:
  burnin_health``, ``kind: drive``), citing the drive's model and serial, the counter, both
  values: media errors, reallocated sectors, pending sectors, NVMe error-log entries; an
  NVMe critical warning bit set during the run (``critical warning rose during the run from
  0x00 to 0x04 (NVM subsystem reliability degraded)``) and a drive whose own health verdict
  turned from PASSED to FAILED FAIL it the same way. A drive found before and missing after
  FAILS too. Health not read after the run (or not
  read at all) is an ``n/a`` check and a warning: never "no errors".
* **Stability over the whole run.** Each pass's rate per round (IOPS of the mix, MiB/s of
  the write and verify passes) as one series through ``metrics.stability_of`` (the pace rule
  of the stability diagnostic, docs/diagnostics.md): a last third of the rounds more than
  ``drop_pct`` below the first is a warning (a drive that slows under sustained load), never
  a failure; a steady run is a passed check quoting the change.
"""

from __future__ import annotations

from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.drives import critical_warning_text
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics.model import DEFAULTS as _DIAG_DEFAULTS
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.checks import make_check
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.drives import drive_label, drive_list
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import record_metrics
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.stability import stability_of

# health counters that must not rise during a burn-in: key of the drive's health -> words
RISING = (("media_errors", "media errors"), ("reallocated_sectors", "reallocated sectors"),
          ("pending_sectors", "pending sectors"), ("num_err_log_entries", "NVMe error-log entries"))
# the figure of each pass whose pace is followed over the rounds
PASS_FIGURE = {"write": ("mibps", "MiB/s"), "verify": ("mibps", "MiB/s"), "mix": ("iops", "IOPS")}


def burnin_records(records):
    """The records of burn-in workloads (their spec carries ``burnin``)."""
    return [r for r in records or [] if isinstance(r, dict) and isinstance(r.get("burnin"), dict)]


def _key(drive):
    return drive.get("serial") or drive.get("path") or drive.get("name")


def _byte(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 255 else None


def _warning_text(before, after):
    """``from 0x00 to 0x04 (NVM subsystem reliability degraded)``: a critical warning byte
    before and after, with what the bits set during the run mean."""
    new = critical_warning_text(after & ~before)
    return "from 0x%02x to 0x%02x (%s)" % (before, after, "; ".join(new) or "reserved bits")


def _turned_failed(label, h0, h1, rose):
    """A drive whose own verdict was PASSED before and FAILED after, not already explained by a
    critical warning that rose: ``(message, problems after)`` or None."""
    if h0.get("passed") is not True or h1.get("passed") is not False:
        return None
    if any(key == "critical_warning" for key, _w, _a, _b in rose):
        return None
    problems = "; ".join(h1.get("problems") or []) or "the drive reports itself failing"
    return "burn-in: %s: the drive's own health verdict turned FAILED during the run (%s)" % (label, problems)


def health_checks(before, after):
    """Checks of each drive's health counters before and after the run (module docstring)."""
    before, after = drive_list(before), drive_list(after) if after is not None else None
    if not before:
        msg = "burn-in: drive health before the run not read (no drive inventory); rising error counters not checked"
        return [make_check(None, "burnin_health", None, None, None, None, None, msg, "n/a", "drive", msg)]
    if after is None:
        msg = ("burn-in: drive health after the run not read; media errors, reallocated and pending sectors and "
               "NVMe error-log entries rising during the run were not checked")
        return [make_check(None, "burnin_health", None, None, None, None, None, msg, "n/a", "drive", msg)]
    later = {_key(d): d for d in after}
    out = []
    for d in before:
        label = drive_label(d)
        now = later.get(_key(d))
        if now is None and d.get("transport") == "loop":
            # not hardware: a loop device is attached and detached by software (snapd's squashfs
            # mounts, an image mounted for a moment); its backing file's disk is what counts
            msg = ("burn-in: loop device %s was detached during the run (not hardware: its backing "
                   "file's disk is what counts)" % (d.get("name") or d.get("path") or "?"))
            out.append(make_check(None, "burnin_health", "drive", None, None, None, None, msg, "n/a", "drive", msg))
            continue
        if now is None:
            msg = "burn-in: %s was not found after the run" % label
            out.append(make_check(None, "burnin_health", "drive", None, None, None, False, msg, "fail", "drive", msg))
            continue
        h0, h1 = d.get("health") or {}, now.get("health") or {}
        if not h0.get("collected") or not h1.get("collected"):
            msg = "burn-in: %s: health not collected %s the run (%s)" % (
                label, "before" if not h0.get("collected") else "after",
                (h1 if h0.get("collected") else h0).get("reason") or "no reason given")
            out.append(make_check(None, "burnin_health", None, None, None, None, None, msg, "n/a", "drive", msg))
            continue
        compared, rose = [], []
        for key, words in RISING:
            a, b = h0.get(key), h1.get(key)
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                compared.append("%s %s -> %s" % (words, fmt_num(a), fmt_num(b)))
                if b > a:
                    rose.append((key, words, a, b))
        w0, w1 = _byte(h0.get("critical_warning")), _byte(h1.get("critical_warning"))
        if w0 is not None and w1 is not None:
            compared.append("critical warning 0x%02x -> 0x%02x" % (w0, w1))
            if w1 & ~w0:        # a warning bit the drive set during the run
                rose.append(("critical_warning", "critical warning", w0, w1))
        ev = "; ".join(compared) or "no counter reported before and after"
        for key, words, a, b in rose:
            if key == "critical_warning":
                msg = "burn-in: %s: critical warning rose during the run %s" % (label, _warning_text(a, b))
            else:
                msg = "burn-in: %s: %s rose during the run from %s to %s" % (label, words, fmt_num(a), fmt_num(b))
            c = make_check(None, "burnin_health", key, b, a, "<=", False, ev, "fail", "drive", msg)
            c.update(drive=d.get("name"), serial=d.get("serial"), model=d.get("model"))
            out.append(c)
        turned = _turned_failed(label, h0, h1, rose)
        if turned:
            c = make_check(None, "burnin_health", "health.passed", False, True, "==", False, ev, "fail", "drive", turned)
            c.update(drive=d.get("name"), serial=d.get("serial"), model=d.get("model"))
            out.append(c)
        if not rose and not turned:
            msg = "burn-in: %s: no error counter rose during the run (%s)" % (label, ev)
            status = "pass" if compared else "n/a"
            out.append(make_check(None, "burnin_health", None, None, None, None, True if compared else None, ev,
                                  status, "drive", msg))
    return out


def run_stability(records, drop_pct=None):
    """``(checks, warnings)``: each pass's pace over the rounds (module docstring)."""
    drop = 100.0 * _DIAG_DEFAULTS["stability_drop"] if drop_pct is None else drop_pct
    series = {}
    for r in burnin_records(records):
        kind = r["burnin"].get("pass")
        if kind in PASS_FIGURE:
            series.setdefault(kind, []).append(record_metrics(r).get(PASS_FIGURE[kind][0]))
    checks, warnings = [], []
    for kind, values in series.items():
        st = stability_of(values)
        label = PASS_FIGURE[kind][1]
        if st is None or st.get("change_pct") is None:
            continue          # fewer than 6 rounds: too short to judge a pace
        head = "burn-in %s pass over %d rounds: %s %s -> %s (first to last third, %s %%)" % (
            kind, st["intervals"], label, fmt_num(st["first_iops"]), fmt_num(st["last_iops"]), fmt_num(st["change_pct"]))
        if st["change_pct"] < -drop:
            msg = "%s: slowed more than %s %% under sustained load" % (head, fmt_num(drop))
            warnings.append(msg)
            checks.append(make_check(None, "burnin_stability", PASS_FIGURE[kind][0], st["change_pct"], -drop, ">=",
                                     None, msg, "n/a", "diagnostic", msg))
        else:
            msg = "%s: kept its pace" % head
            checks.append(make_check(None, "burnin_stability", PASS_FIGURE[kind][0], st["change_pct"], -drop, ">=",
                                     True, msg, "pass", "diagnostic", msg))
    return checks, warnings


def burnin_checks(checks, records, drives_before, drives_after):
    """Append the burn-in checks of a host (health before/after, stability) to ``checks``;
    the warnings. Nothing for a host without burn-in workloads."""
    if not burnin_records(records):
        return []
    health = health_checks(drives_before, drives_after)
    checks.extend(health)
    warnings = [c["message"] for c in health if c["status"] == "n/a"]
    more, stability_warnings = run_stability(records)
    checks.extend(more)
    return warnings + stability_warnings


__all__ = ["burnin_checks", "burnin_records", "health_checks", "run_stability", "RISING"]
