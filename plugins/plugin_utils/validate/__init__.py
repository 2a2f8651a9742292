# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inputs refused before any host is contacted: a host's variables (inputs) and array mode's
inputs across hosts (arrays), each error naming the variable, the host and the closest
valid value.

May import: module_utils; plugin_utils: common, history, metrics, diagnostics, judge, array.
"""
