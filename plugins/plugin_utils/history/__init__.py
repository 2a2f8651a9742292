# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each host against its own accepted history: the earlier runs' summaries in history.d/
(store), drift, trends, wear and drive identity (drift), and pruning run directories with
their baselines kept (retention; docs/compliance.md).

May import: module_utils; plugin_utils: common.
"""
