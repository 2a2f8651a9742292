# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names in a run directory (``<fleetqual_results_dir>/<run_id>/``) that more than one package
reads: the judge's resume (a killed run's records, judge/resume.py) and the compliance history
(history/store.py)."""

REPORT = "fleet.json"       # the fleet report, written once every host of the run is in
TAKEN = ".collected"        # <host>.json.collected: a later run reported that record as its own
