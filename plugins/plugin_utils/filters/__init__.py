# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The thin wrappers behind the collection's Jinja2 filters (table): each filter file under
plugins/filter/ returns one of them, so the role, the callback and the actions share the
very same code.

May import: module_utils; plugin_utils: common, history, metrics, diagnostics, judge, array, validate, fleet, report.
"""
